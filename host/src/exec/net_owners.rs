//! Which command of a session made a connection to the session's proxy or host-port relays,
//! so that each command's result lists the destinations it tried, and no other's.
//!
//! The proxy accepts a TCP connection made inside the session's network namespace; TCP has no
//! peer credentials. The accepted socket's peer address is the client socket's own address,
//! which the namespace's `/proc/PID/net/tcp` (read through one of the session's processes)
//! maps to the socket's inode; the process holding that inode among its descriptors is found
//! by a walk of the session's process tree (`/proc/PID/task/TID/children`, then
//! `/proc/PID/fd`), and its command by its session id: every command leads a session of its
//! own (`setsid`), which the processes it starts keep unless they make their own, when their
//! parents are asked in turn. The lookup runs once per proxied connection, in that
//! connection's thread, and only while some command keeps a record; a connection no running
//! command holds (a background process of an ended command, a daemon that left its session
//! and parent) is recorded for the session only.

use crate::proxy::{Attribution, Records};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

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
}

impl Owners {
    /// Sets the session's top process once it runs.
    pub(crate) fn started(&self, pid: i32) {
        self.top.store(pid, Ordering::Release);
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

    /// The command whose session (or an ancestor's) process `pid` is in.
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
        let inode = socket_inode(top, peer, local)?;
        let pid = holder(top, inode)?;
        self.command_of(pid)
    }
}

/// The inode of the TCP socket whose own address is `peer` and whose peer is `local`, from
/// the network namespace of process `pid`.
fn socket_inode(pid: i32, peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        if let Some(inode) = find_inode(&text, peer, local) {
            return Some(inode);
        }
    }
    None
}

/// The inode on the line of a `/proc/net/tcp` or `tcp6` table whose local address is `own`
/// and remote address `remote`.
fn find_inode(table: &str, own: SocketAddr, remote: SocketAddr) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (l, r, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
        (same(parse_address(l)?, own) && same(parse_address(r)?, remote))
            .then(|| inode.parse().ok())
            .flatten()
    })
}

/// Whether two addresses are the same, an IPv4 one and its IPv4-mapped IPv6 form alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let v4 = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && v4(a.ip()) == v4(b.ip())
}

/// An address of a `/proc/net/tcp{,6}` line: the address as 32-bit words in hex, each in the
/// machine's byte order, a colon, the port in hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
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
        assert_eq!(find_inode(table, client, proxy), Some(222));
        assert_eq!(find_inode(table, proxy, client), Some(333));
        assert_eq!(find_inode(table, client, client), None);
        let v6 = "  sl  local_address                         remote_address                        st\n\
   0: 0000000000000000FFFF00000100007F:D431 0000000000000000FFFF00000100007F:0C38 01 00000000:00000000 00:00000000 00000000     0        0 444 1\n";
        assert_eq!(find_inode(v6, client, proxy), Some(444));
        for bad in [
            "",
            "x\n1: zz:1 00:0 0 0 0 0 0 0 5",
            "x\n1: 0100007F 0100007F:0C38",
        ] {
            assert_eq!(find_inode(bad, client, proxy), None, "{bad:?}");
        }
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
