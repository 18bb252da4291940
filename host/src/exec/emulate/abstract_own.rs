//! Abstract unix addresses in the isolated tier when the job shares the host's network
//! namespace (`shell-network` without a proxy): the supervisor makes the job's `connect` and
//! addressed sends, so Landlock's abstract scope (which only the job's own domain applies)
//! does not hold for them. Instead the supervisor lets an abstract address through only when
//! the socket bound to that name is held by a process of the job's PID namespace: the job's own
//! servers (a `dbus-daemon` it started, Python's `multiprocessing` listeners, Go's tests) keep
//! working, and the host's (`@/tmp/.X11-unix/X0`, a desktop's D-Bus) stay out of reach.
//!
//! The name's socket is found in the job's network namespace's `/proc/TID/net/unix` (the
//! kernel lists abstract names there with a leading `@`, each NUL byte written as `@`), its
//! holder among the descriptors of the processes the job's own `/proc` lists
//! (`/proc/TID/root/proc`: its PID namespace and nothing else). Between this check and the
//! supervisor's connect the name could change hands only if the job's socket were closed and a
//! process outside bound the same name in that instant.

use std::os::unix::ffi::OsStrExt;

/// Who holds the socket bound to an abstract name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// A process of the job.
    Job,
    /// Nobody: the name is not bound (the call's own answer is ECONNREFUSED).
    Unbound,
    /// A process the job's PID namespace does not hold (or one that could not be looked at).
    Other,
}

/// Who holds the socket bound to the abstract `name` (the address after its family, leading
/// NUL included) as thread `tid` of the job sees it.
pub(super) fn holder(tid: u32, name: &[u8]) -> Holder {
    let Ok(table) = std::fs::read(format!("/proc/{tid}/net/unix")) else {
        return Holder::Other;
    };
    let inodes = bound(&table, name);
    if inodes.is_empty() {
        return Holder::Unbound;
    }
    let want: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let procs = format!("/proc/{tid}/root/proc");
    let Ok(entries) = std::fs::read_dir(&procs) else {
        return Holder::Other;
    };
    for e in entries.flatten() {
        if !e.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                if want
                    .iter()
                    .any(|w| link.as_os_str().as_bytes() == w.as_bytes())
                {
                    return Holder::Job;
                }
            }
        }
    }
    Holder::Other
}

/// The inodes of the sockets a `/proc/net/unix` listing shows bound to the abstract `name`.
fn bound(table: &[u8], name: &[u8]) -> Vec<u64> {
    let shown: Vec<u8> = name
        .iter()
        .map(|b| if *b == 0 { b'@' } else { *b })
        .collect();
    let mut out = Vec::new();
    for line in table.split(|&b| b == b'\n').skip(1) {
        // Num RefCount Protocol Flags Type St Inode Path: the path is the rest of the line
        // after the seventh field (it may hold spaces).
        let mut rest = line;
        let mut fields = Vec::new();
        for _ in 0..7 {
            let start = rest.iter().position(|b| *b != b' ').unwrap_or(rest.len());
            rest = &rest[start..];
            let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
            fields.push(&rest[..end]);
            rest = &rest[end..];
        }
        let Some(path) = rest.strip_prefix(b" ") else {
            continue;
        };
        if path == shown.as_slice() {
            if let Some(inode) = std::str::from_utf8(fields[6])
                .ok()
                .and_then(|s| s.parse().ok())
            {
                out.push(inode);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_gives_the_inodes_bound_to_an_abstract_name() {
        let table = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
0000000000000000: 00000002 00000000 00010000 0001 01 111 @my-server\n\
0000000000000000: 00000002 00000000 00010000 0001 01 222 @my-server@x\n\
0000000000000000: 00000003 00000000 00000000 0001 03 333\n\
0000000000000000: 00000002 00000000 00010000 0001 01   444 /run/a socket\n\
0000000000000000: 00000002 00000000 00010000 0001 01 555 @with space\n";
        assert_eq!(bound(table, b"\0my-server"), [111]);
        // A NUL inside the name is shown as `@` too.
        assert_eq!(bound(table, b"\0my-server\0x"), [222]);
        assert_eq!(bound(table, b"\0with space"), [555]);
        for none in [&b"\0my-serve"[..], b"\0my-server ", b"my-server", b"\0"] {
            assert!(bound(table, none).is_empty(), "{none:?}");
        }
        assert!(bound(b"", b"\0x").is_empty());
        assert!(bound(b"header\ngarbage line", b"\0x").is_empty());
    }

    #[test]
    fn a_name_this_process_binds_is_held_by_its_own_pid_namespace() {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(
            format!("sandbox-abstract-test-{}", std::process::id()).as_bytes(),
        )
        .unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let tid = std::process::id();
        let name = format!("\0sandbox-abstract-test-{tid}");
        // From this process's own view: its PID namespace is the host's and it holds it.
        assert_eq!(holder(tid, name.as_bytes()), Holder::Job);
        assert_eq!(
            holder(tid, b"\0sandbox-abstract-test-none"),
            Holder::Unbound
        );
        drop(l);
        assert_eq!(holder(tid, name.as_bytes()), Holder::Unbound);
    }
}
