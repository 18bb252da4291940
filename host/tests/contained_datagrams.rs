//! Datagrams in the contained tier (`--isolation off`) under `shell-network`: `sendto`,
//! `sendmsg` and `sendmmsg` with a pathname address reach a unix datagram socket outside the
//! writable places only when the request names it, as `connect` does; the job's own sockets,
//! descriptors passed with `SCM_RIGHTS`, socket pairs and UDP work as before; abstract
//! addresses are refused as for `connect` (docs/isolation.md, "Unix sockets in the contained
//! tier"). Controls in the filtered tier (`--landlock off` as well). A real python3 datagram
//! listener, a dynamic and a static program, as root and as uid 65534.

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::contained::{compile_c, owned_dir, text};
use common::{command, As, BOTH};

/// Sends `argv[2]-sendto`, `argv[2]-sendmsg` and two `argv[2]-sendmmsg-N` to the socket at
/// `argv[1]`, printing each call's errno (or, for `sendmmsg`, the messages sent).
const SEND_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
int main(int argc, char **argv) {
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    char m1[64], m2[64], m3[64], m4[64];
    snprintf(m1, 64, "%s-sendto", argv[2]); snprintf(m2, 64, "%s-sendmsg", argv[2]);
    snprintf(m3, 64, "%s-sendmmsg-1", argv[2]); snprintf(m4, 64, "%s-sendmmsg-2", argv[2]);
    printf("sendto %d\n", sendto(s, m1, strlen(m1), 0, (void *)&a, sizeof a) < 0 ? errno : 0);
    struct iovec v = { m2, strlen(m2) };
    struct msghdr h = { .msg_name = &a, .msg_namelen = sizeof a, .msg_iov = &v, .msg_iovlen = 1 };
    printf("sendmsg %d\n", sendmsg(s, &h, 0) < 0 ? errno : 0);
    struct iovec w[2] = { { m3, strlen(m3) }, { m4, strlen(m4) } };
    struct mmsghdr mm[2];
    memset(mm, 0, sizeof mm);
    for (int i = 0; i < 2; i++) {
        mm[i].msg_hdr.msg_name = &a; mm[i].msg_hdr.msg_namelen = sizeof a;
        mm[i].msg_hdr.msg_iov = &w[i]; mm[i].msg_hdr.msg_iovlen = 1;
    }
    int n = sendmmsg(s, mm, 2, 0);
    if (n < 0) printf("sendmmsg errno %d\n", errno);
    else printf("sendmmsg sent %d lens %u %u\n", n, mm[0].msg_len, mm[1].msg_len);
    return 0;
}
"#;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A python3 datagram listener at `dir/log.sock`, run as `who`, writing what it receives to
/// `dir/received` a line each.
fn listener(who: As, dir: &Path) -> (Killed, PathBuf, PathBuf) {
    let sock = dir.join("log.sock");
    let log = dir.join("received");
    let out = fs::File::create(&log).unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
    }
    let child = command(who, "python3")
        .args([
            "-c",
            "import socket, sys\n\
             s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])\n\
             while True:\n    print(s.recv(4096).decode(), flush=True)\n",
        ])
        .arg(&sock)
        .stdout(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < until, "listener never bound");
        std::thread::sleep(Duration::from_millis(20));
    }
    (Killed(child), sock, log)
}

/// What the listener received so far, once a marker sent now has arrived (so that nothing
/// sent before is still on its way).
fn received(sock: &Path, log: &Path, n: u32) -> String {
    let mark = format!("sync-{n}");
    UnixDatagram::unbound()
        .unwrap()
        .send_to(mark.as_bytes(), sock)
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let got = fs::read_to_string(log).unwrap();
        if got.contains(&mark) {
            return got;
        }
        assert!(Instant::now() < until, "the marker never arrived: {got}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn programs(dir: &Path) -> [PathBuf; 2] {
    [
        compile_c(dir, "send", SEND_C, false),
        compile_c(dir, "send-static", SEND_C, true),
    ]
}

/// `sandbox run --allow-root --isolation off --profile shell-network ARGS` as `who` in `cwd`.
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--isolation", "off", "--profile", "shell-network"];
    all.extend_from_slice(args);
    common::contained::run(who, cwd, &all)
}

#[test]
fn a_datagram_socket_outside_is_out_of_reach_unless_named() {
    let bin = owned_dir(As::Root, "contained-dgram-bin");
    let progs = programs(bin.path());
    for who in BOTH {
        let out = owned_dir(who, "contained-dgram-out");
        let ws = owned_dir(who, "contained-dgram-ws");
        let (_listener, sock, log) = listener(who, out.path());
        let sock_s = sock.display().to_string();
        let mut sync = 0;
        for prog in &progs {
            let prog_s = prog.display().to_string();
            let kind = if prog_s.ends_with("static") {
                "static"
            } else {
                "dynamic"
            };
            let mut base = vec![];
            if kind == "static" {
                base.extend(["--static-binary", "confine"]);
            }
            for (how, extra) in [
                ("control", vec!["--landlock", "off"]),
                ("contained", vec![]),
                ("named", vec!["--allow-unix-socket", &sock_s]),
            ] {
                let marker = format!("{who:?}-{kind}-{how}");
                let script = format!("{prog_s} {sock_s} {marker}");
                let mut args = base.clone();
                args.extend(extra);
                args.extend(["--", "bash", "-c", &script]);
                let o = run(who, ws.path(), &args);
                assert!(o.status.success(), "{marker}: {}", text(&o));
                let stdout = String::from_utf8_lossy(&o.stdout);
                let err = String::from_utf8_lossy(&o.stderr);
                sync += 1;
                let got = received(&sock, &log, sync);
                let arrived = ["sendto", "sendmsg", "sendmmsg-1", "sendmmsg-2"]
                    .map(|m| got.contains(&format!("{marker}-{m}\n")));
                if how == "contained" {
                    assert_eq!(arrived, [false; 4], "{marker}: {}\n{got}", text(&o));
                    let e = libc::EACCES;
                    assert!(
                        stdout.contains(&format!("sendto {e}\nsendmsg {e}\nsendmmsg errno {e}")),
                        "{marker}: {}",
                        text(&o)
                    );
                    for call in ["sendto", "sendmsg", "sendmmsg"] {
                        assert!(
                            err.lines().any(|l| l.contains(&format!("refused {call} "))
                                && l.contains(&format!("to allow: --allow-unix-socket {sock_s}"))),
                            "{marker} {call}: {}",
                            text(&o)
                        );
                    }
                } else {
                    // Control (filtered tier) and the named socket: every datagram arrives.
                    assert_eq!(arrived, [true; 4], "{marker}: {}\n{got}", text(&o));
                    assert!(
                        stdout.contains("sendto 0\nsendmsg 0\nsendmmsg sent 2 lens "),
                        "{marker}: {}",
                        text(&o)
                    );
                    let lens = format!(
                        "lens {} {}",
                        marker.len() + "-sendmmsg-1".len(),
                        marker.len() + "-sendmmsg-2".len()
                    );
                    assert!(stdout.contains(&lens), "{marker}: {}", text(&o));
                    if how == "named" && kind == "dynamic" {
                        assert!(err.is_empty(), "{marker}: {}", text(&o));
                    }
                }
            }
        }
        // logger, a real client of a datagram log socket (it connects, then sends).
        for (landlock, arrives) in [("off", true), ("preferred", false)] {
            let marker = format!("{who:?}-logger-{landlock}");
            let o = run(
                who,
                ws.path(),
                &[
                    "--landlock",
                    landlock,
                    "--",
                    "bash",
                    "-c",
                    &format!("logger -d -u {sock_s} {marker}"),
                ],
            );
            sync += 1;
            let got = received(&sock, &log, sync);
            assert_eq!(got.contains(&marker), arrives, "{marker}: {}", text(&o));
        }
    }
}

/// The job's own datagram socket in the workspace (relative and absolute names, a descriptor
/// passed with `SCM_RIGHTS` and read back, its own credentials with `SCM_CREDENTIALS`), a
/// socket pair, UDP to a listener on 127.0.0.1: all as before, with nothing on stderr.
const OWN_PY: &str = r#"
import array, os, socket, sys
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); r.bind('own.sock')
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(b'rel', 'own.sock'); print('own', r.recv(10))
s.sendto(b'abs', os.path.abspath('own.sock')); print('own', r.recv(10))
f = open('data', 'rb')
s.sendmsg([b'fd'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [f.fileno()]))], 0, 'own.sock')
msg, anc, _, _ = r.recvmsg(10, socket.CMSG_SPACE(4))
fds = array.array('i'); fds.frombytes(anc[0][2])
print('passed', msg, os.read(fds[0], 7))
import struct
r.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
creds = struct.pack('iII', os.getpid(), os.getuid(), os.getgid())
s.sendmsg([b'cred'], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0, 'own.sock')
msg, anc, _, _ = r.recvmsg(10, 64)
print('creds', msg, struct.unpack('iII', anc[0][2])[1] == os.getuid())
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.sendmsg([b'pa', b'ir']); print('pair', b.recv(10))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b'udp', ('127.0.0.1', int(sys.argv[1]))); print('udp sent')
"#;

#[test]
fn own_sockets_passed_descriptors_pairs_and_udp_work() {
    for who in BOTH {
        let ws = owned_dir(who, "contained-dgram-own");
        fs::write(ws.path().join("data"), "payload").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let port = udp.local_addr().unwrap().port().to_string();
        for landlock in ["off", "preferred"] {
            let o = run(
                who,
                ws.path(),
                &["--landlock", landlock, "--", "python3", "-c", OWN_PY, &port],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            for want in [
                "own b'rel'",
                "own b'abs'",
                "passed b'fd' b'payload'",
                "creds b'cred' True",
                "pair b'pair'",
                "udp sent",
            ] {
                assert!(
                    out.contains(want),
                    "{who:?} {landlock} {want}: {}",
                    text(&o)
                );
            }
            assert!(o.stderr.is_empty(), "{who:?} {landlock}: {}", text(&o));
            let mut buf = [0u8; 8];
            let (n, _) = udp.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"udp", "{who:?} {landlock}");
            fs::remove_file(ws.path().join("own.sock")).unwrap();
        }
        // An abstract address is refused and named, as for connect; control: the filtered
        // tier sends it.
        let abs = "import socket\n\
                   r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); r.bind('\\0contained-dgram')\n\
                   s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n\
                   try:\n    s.sendto(b'x', '\\0contained-dgram'); print('abstract', r.recv(4))\n\
                   except OSError as e:\n    print('abstract errno', e.errno)\n";
        for (landlock, want) in [
            ("off", "abstract b'x'".to_string()),
            ("preferred", format!("abstract errno {}", libc::EPERM)),
        ] {
            let o = run(
                who,
                ws.path(),
                &["--landlock", landlock, "--", "python3", "-c", abs],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains(&want), "{who:?} {landlock}: {}", text(&o));
        }
    }
}

/// Hostile arguments to the three calls, each call's errno (or result) printed.
const HOSTILE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#define TRY(name, call) { long rc = (call); printf(name " %ld\n", rc < 0 ? -(long)errno : rc); }
int main(void) {
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
    strcpy(a.sun_path, "no-such.sock");
    struct sockaddr_un f = a; strcpy(f.sun_path, "file");
    char big[4096]; memset(big, 0, sizeof big);
    struct iovec v = { "x", 1 };
    struct msghdr h = { .msg_name = &a, .msg_namelen = sizeof a, .msg_iov = &v, .msg_iovlen = 1 };
    TRY("bad-fd", sendto(9999, "x", 1, 0, (void *)&a, sizeof a));
    TRY("not-socket", sendto(0, "x", 1, 0, (void *)&a, sizeof a));
    TRY("huge-addrlen", sendto(s, "x", 1, 0, (void *)big, sizeof big));
    TRY("negative-addrlen", sendto(s, "x", 1, 0, (void *)&a, -1));
    TRY("missing", sendto(s, "x", 1, 0, (void *)&a, sizeof a));
    TRY("not-a-socket-file", sendto(s, "x", 1, 0, (void *)&f, sizeof f));
    TRY("bad-addr-ptr", sendto(s, "x", 1, 0, (void *)8, sizeof a));
    TRY("null-msghdr", sendmsg(s, NULL, 0));
    struct msghdr m = h; m.msg_iovlen = 2000;
    TRY("long-iov", sendmsg(s, &m, 0));
    m = h; m.msg_iov = (void *)8;
    TRY("bad-iov", sendmsg(s, &m, 0));
    m = h; m.msg_control = big; m.msg_controllen = 1 << 30;
    TRY("huge-control", sendmsg(s, &m, 0));
    char c[64]; memset(c, 0, sizeof c); struct cmsghdr *cm = (void *)c;
    cm->cmsg_len = 8; cm->cmsg_level = SOL_SOCKET; cm->cmsg_type = SCM_RIGHTS;
    m = h; m.msg_control = c; m.msg_controllen = sizeof c;
    TRY("short-cmsg", sendmsg(s, &m, 0));
    cm->cmsg_len = CMSG_LEN(sizeof(int)); *(int *)CMSG_DATA(cm) = 9999;
    m.msg_controllen = CMSG_SPACE(sizeof(int));
    TRY("rights-bad-fd", sendmsg(s, &m, 0));
    cm->cmsg_len = 200;
    TRY("cmsg-past-end", sendmsg(s, &m, 0));
    struct mmsghdr mm[2]; memset(mm, 0, sizeof mm); mm[0].msg_hdr = h; mm[1].msg_hdr = h;
    TRY("mmsg-none", sendmmsg(s, mm, 0, 0));
    TRY("mmsg-missing", sendmmsg(s, mm, 2, 0));
    TRY("mmsg-null", sendmmsg(s, NULL, 2, 0));
    return 0;
}
"#;

#[test]
fn hostile_send_arguments_get_the_kernels_answers() {
    let bin = owned_dir(As::Root, "contained-dgram-hostile");
    let prog = compile_c(bin.path(), "hostile", HOSTILE_C, false);
    let prog_s = prog.display().to_string();
    for who in BOTH {
        let ws = owned_dir(who, "contained-dgram-hostile-ws");
        fs::write(ws.path().join("file"), "").unwrap();
        // Control: the kernel's answers (filtered tier); then the host's.
        let outs: Vec<String> = ["off", "preferred"]
            .iter()
            .map(|landlock| {
                let o = run(who, ws.path(), &["--landlock", landlock, "--", &prog_s]);
                assert!(o.status.success(), "{who:?} {landlock}: {}", text(&o));
                String::from_utf8_lossy(&o.stdout).into_owned()
            })
            .collect();
        assert_eq!(outs[0], outs[1], "{who:?}: kernel, then the host");
        assert!(
            outs[1].contains(&format!("missing -{}", libc::ENOENT)),
            "{}",
            outs[1]
        );
    }
}

#[test]
fn a_profile_file_gets_the_same_supervision() {
    // A profile file refusing a loader call: the child attaches the outer filter (carrying the
    // claims) and the preload stacks the exact one. Root only: uid 65534 cannot take a
    // listener from a child without namespaces (such a request is refused, named).
    let bin = owned_dir(As::Root, "contained-dgram-custom-bin");
    let prog = programs(bin.path())[0].display().to_string();
    let out = owned_dir(As::Root, "contained-dgram-custom-out");
    let ws = owned_dir(As::Root, "contained-dgram-custom-ws");
    let profile = bin.path().join("custom.toml");
    fs::write(
        &profile,
        "description = \"shell-network without statfs\"\n\
         allow = [\"@base\", \"@fd-io\", \"@fs-read\", \"@fs-write\", \"@threads\", \
         \"@process\", \"@exec\", \"@network\"]\n\
         deny = [\"@hardening\", \"statfs\"]\n",
    )
    .unwrap();
    let profile_s = profile.display().to_string();
    let (_listener, sock, log) = listener(As::Root, out.path());
    let sock_s = sock.display().to_string();
    for (n, landlock) in [(1, "off"), (2, "preferred")] {
        let marker = format!("custom-{landlock}");
        let o = common::contained::run(
            As::Root,
            ws.path(),
            &[
                "--isolation",
                "off",
                "--landlock",
                landlock,
                "--profile",
                &profile_s,
                "--",
                "bash",
                "-c",
                &format!("{prog} {sock_s} {marker}"),
            ],
        );
        let got = received(&sock, &log, n);
        let arrived = got.contains(&format!("{marker}-sendto\n"));
        // Control: the filtered tier delivers; the contained tier refuses and names it.
        assert_eq!(arrived, landlock == "off", "{marker}: {}\n{got}", text(&o));
        if landlock == "preferred" {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(&format!("to allow: --allow-unix-socket {sock_s}"))
                    && !err.contains("unguarded"),
                "{}",
                text(&o)
            );
        }
    }
}
