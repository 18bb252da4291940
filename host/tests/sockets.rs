//! Socket rules of the built-in profiles against the real kernel, as root and as uid 65534:
//!
//! - `sendto(a4 == 0)` of `@fd-io` once compared only the low 32 bits of the destination
//!   address, so under `minimal` a datagram addressed from a page at 0x200000000 reached a Unix
//!   socket outside the sandbox. A C program puts the address there (and, as the control of the
//!   rule, on the stack) and sends from a socket pair; the listener is this test's.
//! - Exotic socket families (AF_VSOCK first: a network namespace does not confine it) are
//!   refused by every profile with a network, with the refusal named on stderr, while curl and
//!   python still fetch from a local HTTP server under the same profiles.
//!
//! Every refusal has its control: the same program unsandboxed (and, for sendto, under
//! `network`, whose filter has no such rule) does what the sandbox stops.

mod common;

use common::{command, sandbox, As, BOTH};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

/// Sends "DGRAM" to the Unix socket `argv[2]` from one end of a socket pair (allowed by every
/// profile), with the destination address at 0x200000000 (`high`: its low 32 bits are zero) or
/// on the stack (`stack`).
const DGRAM_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

int main(int argc, char **argv) {
    if (argc != 3 || strlen(argv[2]) >= sizeof(((struct sockaddr_un *)0)->sun_path)) return 2;
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sockaddr_un local;
    struct sockaddr_un *sa = &local;
    if (strcmp(argv[1], "high") == 0) {
        void *want = (void *)0x200000000UL;
        void *p = mmap(want, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != want) { printf("mmap: failed errno=%d\n", errno); return 3; }
        sa = p;
    } else if (strcmp(argv[1], "stack") != 0) {
        return 2;
    }
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    strcpy(sa->sun_path, argv[2]);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) {
        printf("socketpair: ret=-1 errno=%d\n", errno);
        return 4;
    }
    printf("address: %p\n", (void *)sa);
    long r = sendto(sv[0], "DGRAM", 5, 0, (struct sockaddr *)sa, sizeof *sa);
    if (r < 0) printf("sendto: ret=-1 errno=%d\n", errno);
    else printf("sendto: ret=%ld\n", r);
    return r == 5 ? 0 : 1;
}
"#;

/// Creates one socket of each (family, type) pair given as arguments and prints
/// "socket(F, T): ret=R" or "socket(F, T): ret=-1 errno=E".
const FAMILY_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 1; i + 1 < argc; i += 2) {
        int family = atoi(argv[i]), type = atoi(argv[i + 1]);
        int s = socket(family, type, 0);
        if (s < 0) printf("socket(%d, %d): ret=-1 errno=%d\n", family, type, errno);
        else printf("socket(%d, %d): ret=%d\n", family, type, s);
    }
    return 0;
}
"#;

/// The compiled programs, in a directory every uid can read.
struct Programs {
    _dir: tempfile::TempDir,
    dgram: PathBuf,
    family: PathBuf,
}

fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("sockets")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Programs {
            dgram: gcc(dir.path(), "dgram", DGRAM_C),
            family: gcc(dir.path(), "family", FAMILY_C),
            _dir: dir,
        }
    })
}

/// Compiles `source` with gcc into `dir/name`; panics with gcc's output.
fn gcc(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let res = Command::new("gcc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gcc ({e}); install it: apt-get install gcc"));
    assert!(
        res.status.success(),
        "gcc {name}.c failed:\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    out
}

/// `sandbox run --profile PROFILE -- program args`, as `who`, in the agents' environment.
fn sandboxed(who: As, profile: &str, program: &Path, args: &[&str]) -> Output {
    let mut cmd = sandbox(who);
    cmd.args([
        "run",
        "--profile",
        profile,
        "--allow-root",
        "--timeout",
        "60",
    ]);
    // The constructed view covers host sockets outside the workspace: a socket path among
    // the arguments is named as reachable, so that the filter alone decides.
    for a in args.iter().filter(|a| a.ends_with(".sock")) {
        cmd.args(["--allow-unix-socket", a]);
    }
    cmd.arg("--").arg(program).args(args);
    cmd.output().expect("sandbox run")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A Unix datagram socket bound in a directory of its own, writable by every uid.
struct Listener {
    _dir: tempfile::TempDir,
    path: String,
    socket: UnixDatagram,
}

impl Listener {
    fn new() -> Listener {
        let dir = tempfile::Builder::new().prefix("dgram").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("l.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        socket.set_nonblocking(true).unwrap();
        Listener {
            path: path.to_str().unwrap().to_string(),
            _dir: dir,
            socket,
        }
    }

    /// What arrived since the last call (the sender has exited: a datagram is queued by then).
    fn received(&self) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n) = self.socket.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        got
    }
}

#[test]
fn sendto_an_address_above_4_gib_under_minimal() {
    let prog = &programs().dgram;
    for who in BOTH {
        let l = Listener::new();
        // Control: unsandboxed, both addresses reach the listener.
        for mode in ["high", "stack"] {
            let out = command(who, prog).args([mode, &l.path]).output().unwrap();
            let stdout = text(&out.stdout);
            assert!(out.status.success(), "{who:?} {mode}: {stdout}");
            if mode == "high" {
                assert!(stdout.contains("address: 0x200000000"), "{stdout}");
            }
            assert_eq!(l.received(), [b"DGRAM"], "{who:?} {mode} unsandboxed");
        }
        // Control: under `network` (sendto with any address is part of @network) the listener
        // is reachable from inside the sandbox, so nothing else stops the datagram below.
        let out = sandboxed(who, "network", prog, &["high", &l.path]);
        assert!(out.status.success(), "{who:?}: {}", text(&out.stderr));
        assert_eq!(l.received(), [b"DGRAM"], "{who:?} high under network");
        // Under `minimal`, neither address gets through, and the refusal is named.
        for mode in ["high", "stack"] {
            let out = sandboxed(who, "minimal", prog, &[mode, &l.path]);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert!(
                stdout.contains("sendto: ret=-1"),
                "{who:?} {mode}: {stdout}"
            );
            assert!(
                !out.status.success() && stderr.contains("refused sendto"),
                "{who:?} {mode}: {stderr}"
            );
            assert!(l.received().is_empty(), "{who:?} {mode}: {stdout}");
        }
    }
}

/// Families no tool uses (measured: docs/profiles.md), by number: AF_VSOCK stream and
/// datagram, AF_PACKET, AF_ALG, AF_BLUETOOTH, AF_XDP, AF_KEY.
const EXOTIC: [(&str, &str, &str); 7] = [
    ("40", "1", "AF_VSOCK"),
    ("40", "2", "AF_VSOCK"),
    ("17", "3", "AF_PACKET"),
    ("38", "5", "AF_ALG"),
    ("31", "1", "AF_BLUETOOTH"),
    ("44", "3", "AF_XDP"),
    ("15", "3", "AF_KEY"),
];

fn family_args() -> Vec<&'static str> {
    EXOTIC.iter().flat_map(|(f, t, _)| [*f, *t]).collect()
}

#[test]
fn vsock_and_other_exotic_families_under_the_network_profiles() {
    let prog = &programs().family;
    let args = family_args();
    for who in BOTH {
        // Control: unsandboxed and under `unrestricted`, the kernel creates an AF_VSOCK stream
        // socket (the transport may be missing; the socket is created all the same).
        let out = command(who, prog).args(&args).output().unwrap();
        let stdout = text(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("socket(40, 1): ret=") && !l.contains("-1")),
            "{who:?} unsandboxed: {stdout}"
        );
        let out = sandboxed(who, "unrestricted", prog, &args);
        let stdout = text(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("socket(40, 1): ret=") && !l.contains("-1")),
            "{who:?} unrestricted: {stdout}"
        );
        for profile in ["network", "shell-network", "no-exec"] {
            let out = sandboxed(who, profile, prog, &args);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            for (f, t, name) in EXOTIC {
                let line = format!("socket({f}, {t}): ret=-1 errno=");
                assert!(
                    stdout.contains(&line),
                    "{who:?} {profile} {name}: {stdout}{stderr}"
                );
            }
            // One line names the refused call and what would allow it.
            let named: Vec<&str> = stderr
                .lines()
                .filter(|l| l.contains("refused socket"))
                .collect();
            assert_eq!(named.len(), 1, "{who:?} {profile}: {stderr}");
            assert!(named[0].contains(profile), "{who:?} {profile}: {stderr}");
        }
    }
}

/// A one-page HTTP server on 127.0.0.1 in a thread of this test, answering `count` requests.
fn http_server(count: usize) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        for _ in 0..count {
            let Ok((mut s, _)) = l.accept() else { return };
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 4096];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nserved",
            );
        }
    });
    (port, t)
}

#[test]
fn curl_and_python_fetch_from_a_local_server_under_the_network_profiles() {
    let profiles = ["network", "shell-network", "no-exec"];
    // curl is run directly (network, no-exec: no other program is started) and python through
    // bash -c, as agents run it, where the profile lets a shell start programs.
    // The server thread is left to end with the test binary if a run never connects.
    let (port, _server) = http_server(BOTH.len() * profiles.len() * 2);
    for who in BOTH {
        for profile in profiles {
            for name in ["localhost", "127.0.0.1"] {
                let url = format!("http://{name}:{port}/");
                let out = if name == "localhost" {
                    sandboxed(who, profile, Path::new("/usr/bin/curl"), &["-sS", &url])
                } else {
                    let py = format!(
                        "import urllib.request; print(urllib.request.urlopen('{url}').read().decode())"
                    );
                    if profile == "shell-network" {
                        sandboxed(
                            who,
                            profile,
                            Path::new("/bin/bash"),
                            &["-c", &format!("python3 -c \"{py}\"")],
                        )
                    } else {
                        sandboxed(who, profile, Path::new("/usr/bin/python3"), &["-c", &py])
                    }
                };
                let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
                assert!(
                    out.status.success() && stdout.contains("served"),
                    "{who:?} {profile} {url}: {stdout}{stderr}"
                );
                assert!(
                    stderr.is_empty(),
                    "{who:?} {profile}: nothing on stderr: {stderr}"
                );
            }
        }
    }
}
