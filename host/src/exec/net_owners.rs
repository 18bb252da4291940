//! Which command of a session made a connection to the session's proxy or host-port relays,
//! so that each command's result lists the destinations it tried, and no other's.
//!
//! The proxy accepts a TCP connection made inside the session's network namespace; TCP has no
//! peer credentials. The accepted socket's peer address is the client socket's own address,
//! which a `NETLINK_SOCK_DIAG` socket the resident made in the namespace maps to the socket's
//! inode (one exact lookup in the kernel's table; reading the namespace's `/proc/PID/net/tcp`
//! instead, the fallback, cost 1.2 ms a table here: the kernel walks its whole connection hash,
//! which all namespaces share); the process holding that inode among its descriptors is found
//! by a walk of the session's process tree (`/proc/PID/task/TID/children`, then
//! `/proc/PID/fd`), and its command by its process group (or session): every command leads
//! a group of its own (`setpgid`, or `setsid`, which makes one too), which the processes it
//! starts keep unless they make their own, when their parents are asked in turn. The lookup
//! runs once per proxied connection, in that connection's thread, and only while some command
//! keeps a record; a connection no running command holds (a background process of an ended
//! command, a daemon that left its session and parent) is recorded for the session only.

use crate::proxy::{Attribution, Records};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Processes a walk visits at most (a session is a few processes; this bounds a fork bomb's
/// cost to the proxy).
const MAX_PROCESSES: usize = 4096;
/// Ancestors asked, at most, for a process whose own session is no command's.
const MAX_ANCESTORS: usize = 64;

/// The session's commands that keep a record of their destinations, by the host pid of their
/// first process (the id of the session it leads).
#[derive(Debug, Default)]
pub(crate) struct Owners {
    /// The session's top process (its init, or the resident without one): its tree is
    /// searched, and its `/proc/PID/net` is the namespace's.
    top: AtomicI32,
    commands: Mutex<HashMap<i32, Arc<Records>>>,
    /// A `NETLINK_SOCK_DIAG` socket of the session's network namespace (one question at a
    /// time: the answers would otherwise cross).
    diag: OnceLock<Mutex<OwnedFd>>,
}

impl Owners {
    /// Sets the session's top process once it runs.
    pub(crate) fn started(&self, pid: i32) {
        self.top.store(pid, Ordering::Release);
    }

    /// Finds connections' sockets with `diag`, a `NETLINK_SOCK_DIAG` socket made in the
    /// session's network namespace.
    pub(crate) fn diagnose_with(&self, diag: OwnedFd) {
        let _ = self.diag.set(Mutex::new(diag));
    }

    /// Keeps a record for the command whose first process is `pid` (host pid), until
    /// [`Owners::finish`].
    pub(crate) fn register(&self, pid: i32) -> Arc<Records> {
        let r = Arc::new(Records::default());
        self.lock().insert(pid, Arc::clone(&r));
        r
    }

    /// Stops recording for the command whose first process is `pid`.
    pub(crate) fn finish(&self, pid: i32) {
        self.lock().remove(&pid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Records>>> {
        self.commands.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The command whose group or session (or an ancestor's) process `pid` is in.
    fn command_of(&self, pid: i32) -> Option<Arc<Records>> {
        let commands = self.lock();
        let mut at = pid;
        for _ in 0..MAX_ANCESTORS {
            let st = super::procfs::stat(at)?;
            for key in [at, st.sid, st.pgrp] {
                if let Some(r) = commands.get(&key) {
                    return Some(Arc::clone(r));
                }
            }
            if st.ppid <= 1 {
                return None;
            }
            at = st.ppid;
        }
        None
    }
}

impl Attribution for Owners {
    fn records_for(&self, client: &TcpStream) -> Option<Arc<Records>> {
        if self.lock().is_empty() {
            return None;
        }
        let top = self.top.load(Ordering::Acquire);
        if top <= 0 {
            return None;
        }
        let (peer, local) = (client.peer_addr().ok()?, client.local_addr().ok()?);
        let inode = match self.diag.get() {
            Some(d) => diag_inode(
                d.lock().unwrap_or_else(|e| e.into_inner()).as_fd(),
                peer,
                local,
            )?,
            None => socket_inode(top, peer, local)?,
        };
        let pid = holder(top, inode)?;
        self.command_of(pid)
    }
}

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `INET_DIAG_NOCOOKIE`: the lookup is by address, not by cookie.
const NO_COOKIE: u32 = !0;

/// The inode of the TCP socket whose own address is `own` and whose peer is `remote`, asked of
/// `diag`'s namespace by one exact `inet_diag` lookup (`inet_diag_req_v2` with the socket's
/// id; the kernel looks it up in its table as for an arriving packet).
fn diag_inode(
    diag: std::os::fd::BorrowedFd<'_>,
    own: SocketAddr,
    remote: SocketAddr,
) -> Option<u64> {
    let request = diag_request(own, remote)?;
    crate::sys::send(diag, &request).ok()?;
    // The kernel answers within the send: the reply is queued by the time it returns.
    let mut buf = [0u8; 512];
    let n = crate::sys::recv_now(diag, &mut buf).ok()?;
    diag_answer(&buf[..n], &request[24..60])
}

/// The netlink message asking for the TCP socket (`own`, `remote`), or `None` for addresses
/// of two families.
fn diag_request(own: SocketAddr, remote: SocketAddr) -> Option<Vec<u8>> {
    let (family, src, dst) = match (own.ip(), remote.ip()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s[..4].copy_from_slice(&a.octets());
            d[..4].copy_from_slice(&b.octets());
            (libc::AF_INET as u8, s, d)
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => (libc::AF_INET6 as u8, a.octets(), b.octets()),
        _ => return None,
    };
    let mut m = Vec::with_capacity(72);
    // nlmsghdr: length, type, flags (NLM_F_REQUEST), sequence, port.
    m.extend_from_slice(&72u32.to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, extensions, padding, states (every one).
    m.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]);
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    // inet_diag_sockid: ports and addresses in network order, interface, cookie.
    m.extend_from_slice(&own.port().to_be_bytes());
    m.extend_from_slice(&remote.port().to_be_bytes());
    m.extend_from_slice(&src);
    m.extend_from_slice(&dst);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&NO_COOKIE.to_ne_bytes());
    m.extend_from_slice(&NO_COOKIE.to_ne_bytes());
    Some(m)
}

/// The inode in an `inet_diag_msg` answer about the socket whose ports and addresses are
/// `id` (as asked); `None` for an error (no such socket), another socket (the kernel's lookup
/// falls back to a listener on the port), or anything else.
fn diag_answer(reply: &[u8], id: &[u8]) -> Option<u64> {
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY || reply.get(20..20 + id.len())? != id {
        return None;
    }
    // nlmsghdr (16), then inet_diag_msg: 4 bytes, the id (48), expires, rqueue, wqueue, uid
    // (16), inode.
    let at = 16 + 4 + 48 + 16;
    let inode = u32::from_ne_bytes(reply.get(at..at + 4)?.try_into().ok()?);
    (inode != 0).then_some(u64::from(inode))
}

/// The inode of the TCP socket whose own address is `peer` and whose peer is `local`, from
/// the network namespace of process `pid`.
fn socket_inode(pid: i32, peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    for (table, v6) in [("tcp", false), ("tcp6", true)] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        if let Some(inode) = find_inode(&text, v6, peer, local) {
            return Some(inode);
        }
    }
    None
}

/// The inode on the line of a `/proc/net/tcp` or `tcp6` table whose local address is `own`
/// and remote address `remote`. The addresses are written as the kernel writes them and the
/// line found by its text: a namespace's table holds every socket in `TIME_WAIT` too (hundreds
/// after a build's downloads), and parsing each line cost the proxy milliseconds per
/// connection.
fn find_inode(table: &str, v6: bool, own: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let needle = format!(
        " {} {} ",
        kernel_address(own, v6)?,
        kernel_address(remote, v6)?
    );
    let line = table.lines().skip(1).find(|l| l.contains(&needle))?;
    line.split_whitespace().nth(9)?.parse().ok()
}

/// `addr` as `/proc/net/tcp` (`v6` false) or `tcp6` writes it: the address as 32-bit words
/// in hex, each in the machine's byte order, a colon, the port in hex. An IPv4 address in the
/// `tcp6` table is IPv4-mapped; an IPv6 one has no form in `tcp` (`None`).
fn kernel_address(addr: SocketAddr, v6: bool) -> Option<String> {
    let words: Vec<[u8; 4]> = match (addr.ip(), v6) {
        (IpAddr::V4(a), false) => vec![a.octets()],
        (IpAddr::V6(a), false) => vec![a.to_ipv4_mapped()?.octets()],
        (IpAddr::V4(a), true) => chunks(&a.to_ipv6_mapped().octets()),
        (IpAddr::V6(a), true) => chunks(&a.octets()),
    };
    let mut text: String = words
        .iter()
        .map(|w| format!("{:08X}", u32::from_ne_bytes(*w)))
        .collect();
    text.push_str(&format!(":{:04X}", addr.port()));
    Some(text)
}

/// The four 32-bit words of an IPv6 address.
fn chunks(octets: &[u8; 16]) -> Vec<[u8; 4]> {
    octets
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect()
}

/// The process of `top`'s tree that holds socket `inode` among its descriptors.
fn holder(top: i32, inode: u64) -> Option<i32> {
    let want = format!("socket:[{inode}]");
    let mut queue = vec![top];
    let mut seen = 0;
    while let Some(pid) = queue.pop() {
        seen += 1;
        if seen > MAX_PROCESSES {
            return None;
        }
        if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            for fd in fds.flatten() {
                if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                    return Some(pid);
                }
            }
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(t.path().join("children")) {
                queue.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_give_the_socket_of_an_address_pair() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:0C38 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0\n\
   1: 0100007F:D431 0100007F:0C38 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0 20 4 30 10 -1\n\
   2: 0100007F:0C38 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 20 4 30 10 -1\n";
        let client: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let proxy: SocketAddr = "127.0.0.1:3128".parse().unwrap();
        assert_eq!(find_inode(table, false, client, proxy), Some(222));
        assert_eq!(find_inode(table, false, proxy, client), Some(333));
        assert_eq!(find_inode(table, false, client, client), None);
        let v6 = "  sl  local_address                         remote_address                        st\n\
   0: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000100007F:0C38 01 00000000:00000000 00:00000000 00000000     0        0 444 1\n";
        assert_eq!(find_inode(v6, true, client, proxy), Some(444));
        // An IPv6 address has no form in the IPv4 table.
        let v6_client: SocketAddr = "[::1]:54321".parse().unwrap();
        assert_eq!(find_inode(table, false, v6_client, proxy), None);
        for bad in [
            "",
            "x\n1: zz:1 00:0 0 0 0 0 0 0 5",
            "x\n1: 0100007F 0100007F:0C38",
        ] {
            assert_eq!(find_inode(bad, false, client, proxy), None, "{bad:?}");
        }
    }

    #[test]
    fn diag_answers_other_than_the_socket_asked_for_give_nothing() {
        let own: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let remote: SocketAddr = "127.0.0.1:3128".parse().unwrap();
        let req = diag_request(own, remote).unwrap();
        assert_eq!(req.len(), 72);
        let id = &req[24..60];
        // A well-formed answer about that socket.
        let mut ok = vec![0u8; 16 + 72];
        ok[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        ok[20..56].copy_from_slice(id);
        ok[84..88].copy_from_slice(&777u32.to_ne_bytes());
        assert_eq!(diag_answer(&ok, id), Some(777));
        // Another socket (a listener: no peer), an error message, short or empty replies.
        let mut listener = ok.clone();
        listener[22..24].copy_from_slice(&[0, 0]);
        let mut error = ok.clone();
        error[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        for bad in [&listener[..], &error[..], &ok[..60], &ok[..86], &[][..]] {
            assert_eq!(diag_answer(bad, id), None);
        }
        // Mixed families cannot be asked.
        assert!(diag_request(own, "[::1]:3128".parse().unwrap()).is_none());
    }

    #[test]
    fn a_connection_is_told_to_the_process_that_holds_its_socket() {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // A child in a session of its own connects and waits; the accepted end is traced to it.
        let mut child = std::process::Command::new("setsid")
            .args([
                "python3",
                "-c",
                &format!(
                    "import socket, time\ns = socket.create_connection(('127.0.0.1', {port}))\ntime.sleep(5)"
                ),
            ])
            .spawn()
            .unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        let owners = Owners::default();
        owners.started(std::process::id() as i32);
        // The kernel's answer and the tables' agree on the client's socket.
        let diag = crate::sys::netlink_bound(libc::NETLINK_SOCK_DIAG, 0).unwrap();
        let (peer, local) = (
            accepted.peer_addr().unwrap(),
            accepted.local_addr().unwrap(),
        );
        let by_diag = diag_inode(diag.as_fd(), peer, local);
        assert!(by_diag.is_some());
        assert_eq!(
            by_diag,
            socket_inode(std::process::id() as i32, peer, local)
        );
        assert_eq!(
            diag_inode(diag.as_fd(), local, local),
            None,
            "no such socket"
        );
        owners.diagnose_with(diag);
        assert!(
            owners.records_for(&accepted).is_none(),
            "no command keeps a record yet"
        );
        let record = owners.register(child.id() as i32);
        let found = owners.records_for(&accepted).expect("the child's command");
        assert!(Arc::ptr_eq(&found, &record));
        // Control: a command that holds no end of it is not given it.
        owners.finish(child.id() as i32);
        let _other = owners.register(1);
        assert!(owners.records_for(&accepted).is_none());
        let _ = child.kill();
        let _ = child.wait();
        let mut rest = Vec::new();
        let _ = accepted.read_to_end(&mut rest);
    }
}
