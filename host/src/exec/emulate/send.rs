//! `sendto` with an address, `sendmsg` and `sendmmsg` in the contained tier, made by the host.
//!
//! A datagram names its destination in the call itself: without this a job could send to any
//! unix datagram socket its user may write (`/dev/log`, systemd's notify socket, a service's
//! socket outside the workspace) although `connect` to it is refused. The filter sends
//! `sendto` when its address argument is not NULL (a register: the kernel reads no address
//! otherwise), and every `sendmsg` and `sendmmsg`, whose addresses are in memory the filter
//! cannot see. As for `connect` (module `socket`), the call cannot be let through after a
//! check: another thread could write an address into the header between the check and the
//! kernel's own read. So the host makes every such send:
//!
//! 1. it takes the job's socket with `pidfd_getfd` (the same open file) and reads the header,
//!    the address, the payload and the control data **once**;
//! 2. each address is checked as `connect`'s is: a pathname must lead to a socket in a writable
//!    place or one the request allows, and is replaced by that very object's
//!    `/proc/self/fd/N`; an abstract address is refused (EPERM), as for `connect`; on a TCP
//!    socket (Fast Open) the port rule applies; anything else is used as given;
//! 3. the control data is parsed as the kernel parses it: the descriptors of `SCM_RIGHTS` are
//!    taken from the job (`pidfd_getfd`, the same open files: they are passed on faithfully)
//!    and their numbers replaced by the host's; `SCM_CREDENTIALS` naming the job's process is
//!    made to name the host's where the host may not claim another process (the receiver sees
//!    the host as the sender in any case, as with implicit credentials); anything malformed
//!    gets the kernel's EINVAL before anything is sent;
//! 4. the host sends with `MSG_NOSIGNAL` (a gone peer signals the job's thread, not the host),
//!    first without waiting; a send that would block on a blocking socket goes on on a thread
//!    of its own, so that a full peer never holds up the supervisor. `sendmmsg`'s per-message
//!    lengths are written back into the job's vector.

use super::checked::Checked;
use super::places::{Places, Refused, Why};
use super::socket::{address, ADDR_MAX};
use super::target::Thread;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;

/// Payload copied per message at most: a stream send beyond it is sent in part (a short count,
/// as the kernel may give); a datagram beyond it is EMSGSIZE (the largest a unix or UDP socket
/// takes by default is a few hundred KiB).
const SEND_MAX: usize = 4 << 20;
/// Control data copied at most (the kernel's `optmem_max` is smaller): ENOBUFS beyond it.
const CONTROL_MAX: usize = 64 << 10;
/// `UIO_MAXIOV`: vectors and `sendmmsg` batches longer than it are EMSGSIZE, or cut to it.
const UIO_MAXIOV: u64 = 1024;
/// `SCM_MAX_FD`: descriptors one message may carry.
const SCM_MAX_FD: usize = 253;
/// `sizeof(struct msghdr)` and `sizeof(struct mmsghdr)` on the 64-bit architectures.
const MSGHDR: usize = 56;
const MMSGHDR: u64 = 64;
/// `sizeof(struct cmsghdr)` on the 64-bit architectures.
const CMSGHDR: usize = 16;
// The layouts read from the job's memory are this architecture's.
const _: () = assert!(std::mem::size_of::<libc::msghdr>() == MSGHDR);
const _: () = assert!(std::mem::size_of::<libc::mmsghdr>() as u64 == MMSGHDR);
const _: () = assert!(std::mem::size_of::<libc::cmsghdr>() == CMSGHDR);

/// One message read from the thread and checked, ready to send.
struct Message {
    name: Vec<u8>,
    data: Vec<u8>,
    control: Vec<u8>,
    /// The checked socket file and the taken descriptors the name and control name by number,
    /// held open until the message is sent.
    _held: Vec<OwnedFd>,
}

/// Why a call is not made.
enum Denied {
    /// The call's own error.
    Fail(i32),
    /// Refused: this errno, named.
    Refused(i32, Why),
}

impl From<io::Error> for Denied {
    fn from(e: io::Error) -> Denied {
        Denied::Fail(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// The call as the host will make it.
struct Call {
    sock: OwnedFd,
    messages: Vec<Message>,
    flags: libc::c_int,
    stream: bool,
    /// `sendmmsg`: the vector, whose lengths are written back.
    vector: Option<u64>,
    /// A message after the first that could not be made: the batch ends before it.
    cut: Option<Denied>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_ne_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

/// What the thread and its call are, for reading messages.
struct Reader<'a> {
    t: &'a Thread,
    tid: u32,
    domain: libc::c_int,
    stream: bool,
    places: &'a Places,
}

impl Reader<'_> {
    /// Reads and checks one message: its address (`name` of `len` bytes at `addr`), payload
    /// (`iov` of `n` vectors) and control data.
    fn message(
        &self,
        name: Option<(u64, usize)>,
        payload: Payload,
        control: Option<(u64, u64)>,
    ) -> Result<Message, Denied> {
        let name = match name {
            Some((addr, len)) if len > 0 => Some(self.t.bytes(addr, len)?),
            _ => None,
        };
        let data = match payload {
            Payload::Buffer(addr, len) => self.payload(&[(addr, len)])?,
            Payload::Vector(addr, n) => {
                if n > UIO_MAXIOV {
                    return Err(Denied::Fail(libc::EMSGSIZE));
                }
                let raw = self.t.bytes(addr, n as usize * 16)?;
                let iov: Vec<(u64, u64)> = raw
                    .chunks_exact(16)
                    .map(|c| (u64_at(c, 0), u64_at(c, 8)))
                    .collect();
                if iov.iter().any(|(_, l)| (*l as i64) < 0) {
                    return Err(Denied::Fail(libc::EINVAL));
                }
                self.payload(&iov)?
            }
        };
        let mut held = Vec::new();
        let control = match control {
            Some((_, len)) if len > i32::MAX as u64 || len > CONTROL_MAX as u64 => {
                return Err(Denied::Fail(libc::ENOBUFS))
            }
            Some((addr, len)) if len > 0 => {
                let mut c = self.t.bytes(addr, len as usize)?;
                self.control(&mut c, &mut held)?;
                c
            }
            _ => Vec::new(),
        };
        let name = match name {
            None => Vec::new(),
            Some(n) => match address(self.t, self.domain, n, self.places, self.stream) {
                Checked::Use { addr, object } => {
                    held.extend(object);
                    addr
                }
                Checked::Fail(e) => return Err(Denied::Fail(e)),
                Checked::Refused(e, why) => return Err(Denied::Refused(e, why)),
            },
        };
        Ok(Message {
            name,
            data,
            control,
            _held: held,
        })
    }

    /// The payload of `(address, length)` vectors, up to [`SEND_MAX`].
    fn payload(&self, iov: &[(u64, u64)]) -> Result<Vec<u8>, Denied> {
        let total = iov
            .iter()
            .fold(0u64, |t, (_, l)| t.saturating_add(*l))
            .min(i32::MAX as u64);
        if total > SEND_MAX as u64 && !self.stream {
            return Err(Denied::Fail(libc::EMSGSIZE));
        }
        let mut data = Vec::with_capacity(total.min(SEND_MAX as u64) as usize);
        for (addr, len) in iov {
            let want = (*len as usize).min(SEND_MAX - data.len());
            data.extend(self.t.bytes(*addr, want)?);
            if data.len() == SEND_MAX {
                break;
            }
        }
        Ok(data)
    }

    /// Parses control data as the kernel does (`__scm_send`): every header must fit; the
    /// descriptors of `SCM_RIGHTS` are taken and renumbered, `SCM_CREDENTIALS` checked.
    fn control(&self, c: &mut [u8], held: &mut Vec<OwnedFd>) -> Result<(), Denied> {
        let mut at = 0;
        let mut fds = 0;
        while at + CMSGHDR <= c.len() {
            let len = u64_at(c, at);
            if len < CMSGHDR as u64 || len > (c.len() - at) as u64 {
                return Err(Denied::Fail(libc::EINVAL));
            }
            let len = len as usize;
            let (level, kind) = (i32_at(c, at + 8), i32_at(c, at + 12));
            if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
                let n = (len - CMSGHDR) / 4;
                fds += n;
                if fds > SCM_MAX_FD {
                    return Err(Denied::Fail(libc::EINVAL));
                }
                for i in 0..n {
                    let o = at + CMSGHDR + 4 * i;
                    let fd = self
                        .t
                        .take_fd(self.tid, i32_at(c, o) as u32 as u64)
                        .map_err(|_| Denied::Fail(libc::EBADF))?;
                    c[o..o + 4].copy_from_slice(&fd.as_raw_fd().to_ne_bytes());
                    held.push(fd);
                }
            } else if level == libc::SOL_SOCKET
                && kind == libc::SCM_CREDENTIALS
                && self.places.view.is_some()
            {
                if len == CMSGHDR + 12 {
                    let o = at + CMSGHDR;
                    let mut ucred = [i32_at(c, o), i32_at(c, o + 4), i32_at(c, o + 8)];
                    namespaced_credentials(self.t, &mut ucred)?;
                    for (i, v) in ucred.iter().enumerate() {
                        c[o + 4 * i..o + 4 * i + 4].copy_from_slice(&v.to_ne_bytes());
                    }
                }
            } else if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS {
                // The host sends with its own credentials: they must be the job's.
                if !self.t.same_credentials() {
                    return Err(Denied::Refused(libc::EPERM, Why::Credentials));
                }
                let o = at + CMSGHDR;
                if len == CMSGHDR + 12
                    && !crate::platform::running_as_root()
                    && self.t.tgid().ok() == Some(i32_at(c, o))
                {
                    let host = std::process::id() as i32;
                    c[o..o + 4].copy_from_slice(&host.to_ne_bytes());
                }
            }
            at += (len + 7) & !7;
        }
        Ok(())
    }
}

/// `SCM_CREDENTIALS` (`pid`, `uid`, `gid`) of a thread of the isolated tier, made what the
/// host may send for it. The job names its process in its own PID namespace, the host's
/// kernel reads the host's: the job's own process is made the same process seen from the host
/// where the host may name another (root), else the host's own (the receiver then sees the
/// supervisor as the sender, as in the contained tier). A job without the host's capabilities
/// (root's job holds none in its user namespace) gets the kernel's check for such a sender
/// here, since the host's would pass anything: its own process, user and group only (EPERM).
fn namespaced_credentials(t: &Thread, ucred: &mut [i32; 3]) -> Result<(), Denied> {
    let standing = t.standing();
    if let super::target::Standing::Other = standing {
        return Err(Denied::Refused(libc::EPERM, Why::Credentials));
    }
    let status = t.status().map_err(|_| Denied::Fail(libc::EPERM))?;
    let field = |key: &str| -> Vec<i64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    // NStgid: the process in each PID namespace, the host's first and the job's last.
    let tgids = field("NStgid:");
    let (Some(host), Some(own)) = (tgids.first(), tgids.last()) else {
        return Err(Denied::Fail(libc::EPERM));
    };
    let ours = i64::from(ucred[0]) == *own;
    if let super::target::Standing::FewerCapabilities(_) = standing {
        let (uids, gids) = (field("Uid:"), field("Gid:"));
        let id_of = |ids: &[i64], v: i32| ids.iter().take(3).any(|i| *i == i64::from(v as u32));
        if !ours || !id_of(&uids, ucred[1]) || !id_of(&gids, ucred[2]) {
            return Err(Denied::Fail(libc::EPERM));
        }
    }
    if ours {
        ucred[0] = if crate::platform::running_as_root() {
            *host as i32
        } else {
            std::process::id() as i32
        };
    }
    Ok(())
}

/// Where a message's payload is.
enum Payload {
    /// `sendto`'s buffer and length.
    Buffer(u64, u64),
    /// A `msghdr`'s vector and count.
    Vector(u64, u64),
}

/// Reads a `msghdr` at `addr` into a message.
fn header(r: &Reader<'_>, addr: u64) -> Result<Message, Denied> {
    let h = r.t.bytes(addr, MSGHDR)?;
    let name_addr = u64_at(&h, 0);
    let name_len = i32_at(&h, 8);
    let name = if name_addr == 0 {
        None
    } else if name_len < 0 {
        return Err(Denied::Fail(libc::EINVAL));
    } else {
        // The kernel cuts a longer one to `sockaddr_storage`.
        Some((name_addr, (name_len as u64).min(ADDR_MAX) as usize))
    };
    r.message(
        name,
        Payload::Vector(u64_at(&h, 16), u64_at(&h, 24)),
        Some((u64_at(&h, 32), u64_at(&h, 40))),
    )
}

/// Reads the call `name` (`args`) of thread `t`.
fn read(
    t: &Thread,
    tid: u32,
    name: &str,
    args: &[u64; 6],
    places: &Places,
) -> Result<Call, Denied> {
    let sock = t.take_fd(tid, args[0])?;
    let domain = crate::sys::emulate::socket_domain(sock.as_fd())?;
    let stream =
        crate::sys::emulate::socket_option(sock.as_fd(), libc::SO_TYPE)? == libc::SOCK_STREAM;
    let r = Reader {
        t,
        tid,
        domain,
        stream,
        places,
    };
    let (messages, flags, vector, cut) = match name {
        "sendto" => {
            let len = args[5] as u32 as i32;
            if !(0..=ADDR_MAX as i32).contains(&len) {
                return Err(Denied::Fail(libc::EINVAL));
            }
            let m = r.message(
                Some((args[4], len as usize)),
                Payload::Buffer(args[1], args[2]),
                None,
            )?;
            (vec![m], args[3], None, None)
        }
        "sendmsg" => (vec![header(&r, args[1])?], args[2], None, None),
        "sendmmsg" => {
            let n = (args[2] as u32 as u64).min(UIO_MAXIOV);
            let mut messages = Vec::new();
            let mut cut = None;
            for i in 0..n {
                match header(&r, args[1] + i * MMSGHDR) {
                    Ok(m) => messages.push(m),
                    // The kernel sends the batch up to the first failure, and answers with
                    // that failure only when nothing was sent.
                    Err(d) if i == 0 => return Err(d),
                    Err(d) => {
                        cut = Some(d);
                        break;
                    }
                }
            }
            (messages, args[3], Some(args[1]), cut)
        }
        _ => return Err(Denied::Fail(libc::ENOSYS)),
    };
    Ok(Call {
        sock,
        messages,
        flags: flags as u32 as libc::c_int,
        stream,
        vector,
        cut,
    })
}

/// How far a call's sending got.
#[derive(Default)]
struct Progress {
    /// The messages sent, each with its bytes.
    lens: Vec<u32>,
    /// Bytes of the next message sent so far (a stream's partial send).
    offset: usize,
}

/// Sends from `p` on with `extra` flags; the error that stopped it, if any.
fn advance(call: &Call, p: &mut Progress, extra: libc::c_int) -> Option<io::Error> {
    while let Some(m) = call.messages.get(p.lens.len()) {
        // The name and control data go with the message's first byte only.
        let (name, control): (&[u8], &[u8]) = if p.offset == 0 {
            (&m.name, &m.control)
        } else {
            (&[], &[])
        };
        let flags = call.flags | libc::MSG_NOSIGNAL | extra;
        match crate::sys::emulate::sendmsg(
            call.sock.as_fd(),
            name,
            &m.data[p.offset..],
            control,
            flags,
        ) {
            Ok(n) => {
                p.offset += n;
                if call.stream && n > 0 && p.offset < m.data.len() {
                    continue;
                }
                p.lens.push(p.offset as u32);
                p.offset = 0;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) && extra == 0 => {}
            Err(e) => return Some(e),
        }
    }
    None
}

/// The call's result from its progress: bytes (one message) or messages (`sendmmsg`) sent,
/// else the error.
fn result(call: &Call, mut p: Progress, stopped: Option<io::Error>) -> Result<u64, i32> {
    if p.offset > 0 {
        p.lens.push(p.offset as u32);
    }
    let error = stopped
        .map(|e| e.raw_os_error().unwrap_or(libc::EIO))
        .or(call.cut.as_ref().map(|d| match d {
            Denied::Fail(e) | Denied::Refused(e, _) => *e,
        }));
    match (call.vector, p.lens.as_slice(), error) {
        (Some(_), [], Some(e)) => Err(e),
        (Some(_), lens, _) => Ok(lens.len() as u64),
        (None, [n, ..], _) => Ok(u64::from(*n)),
        (None, [], Some(e)) => Err(e),
        (None, [], None) => Ok(0),
    }
}

/// Finishes a call: `sendmmsg`'s lengths written back, SIGPIPE for a gone peer unless the job
/// asked `MSG_NOSIGNAL`, and the answer.
fn finish(
    listener: BorrowedFd<'_>,
    id: u64,
    call: &Call,
    p: Progress,
    stopped: Option<io::Error>,
    who: (u32, Option<std::fs::File>),
) {
    let sent = p.lens.len() + usize::from(p.offset > 0);
    if let (Some(vector), Some(mem)) = (call.vector, &who.1) {
        let mut lens = p.lens.clone();
        if p.offset > 0 {
            lens.push(p.offset as u32);
        }
        for (i, n) in lens.iter().enumerate() {
            let _ = mem.write_all_at(&n.to_ne_bytes(), vector + i as u64 * MMSGHDR + 56);
        }
    }
    let epipe = stopped
        .as_ref()
        .is_some_and(|e| e.raw_os_error() == Some(libc::EPIPE));
    let r = result(call, p, stopped);
    if epipe && sent == 0 && call.flags & libc::MSG_NOSIGNAL == 0 {
        // The kernel signals the sending thread; its process is read only now (rare).
        let tgid = Thread::open(who.0).and_then(|t| t.tgid());
        if let Ok(tgid) = tgid {
            let _ = crate::sys::emulate::tgkill(tgid, who.0 as i32, libc::SIGPIPE);
        }
    }
    let (val, error) = match r {
        Ok(n) => (n as i64, 0),
        Err(e) => (0, -e),
    };
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags: 0,
    };
    let _ = crate::sys::notif_send(listener, &resp);
}

/// Carries out one waiting `sendto`, `sendmsg` or `sendmmsg` and answers it; a refusal is
/// given to `record` before the answer.
pub(crate) fn send(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
    record: &mut dyn FnMut(Refused),
) {
    let nr = n.data.nr as u32;
    let answer = |error: i32| crate::sys::notif_fail(listener, n.id, error);
    let Some(name) = crate::policy::NATIVE.syscall_name(nr) else {
        return answer(libc::ENOSYS);
    };
    let Ok(thread) = Thread::open(n.pid) else {
        record(Refused {
            nr,
            why: Why::Unreadable,
        });
        return answer(libc::EPERM);
    };
    let read = read(&thread, n.pid, name, &n.data.args, places);
    let mem = match &read {
        Ok(c) if c.vector.is_some() => thread.writer().ok(),
        _ => None,
    };
    // What was read and taken was the thread's only if its call still waits.
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    let call = match read {
        Ok(c) => c,
        Err(Denied::Fail(e)) => return answer(e),
        Err(Denied::Refused(e, why)) => {
            record(Refused { nr, why });
            return answer(e);
        }
    };
    if let Some(Denied::Refused(_, why)) = &call.cut {
        record(Refused {
            nr,
            why: why.clone(),
        });
    }
    let blocking = call.flags & libc::MSG_DONTWAIT == 0
        && crate::sys::emulate::status_flags(call.sock.as_fd())
            .is_ok_and(|f| f & libc::O_NONBLOCK == 0);
    let mut p = Progress::default();
    let extra = if blocking { libc::MSG_DONTWAIT } else { 0 };
    let stopped = advance(&call, &mut p, extra);
    let would_block = stopped
        .as_ref()
        .is_some_and(|e| e.raw_os_error() == Some(libc::EAGAIN));
    let who = (n.pid, mem);
    if !(blocking && would_block) {
        return finish(listener, n.id, &call, p, stopped, who);
    }
    // The rest waits for the peer: on a thread of its own.
    let (id, own) = (n.id, listener.try_clone_to_owned());
    let Ok(own) = own else {
        return finish(listener, n.id, &call, p, stopped, who);
    };
    let spawned = std::thread::Builder::new()
        .name("sandbox-send".into())
        .spawn(move || {
            let mut p = p;
            let stopped = advance(&call, &mut p, 0);
            finish(own.as_fd(), id, &call, p, stopped, who);
        });
    if spawned.is_err() {
        answer(libc::EAGAIN);
    }
}
