//! Unix sockets the host binds *after* an isolated job started (docs/isolation.md, "Sockets
//! bound after the job started"): the view covers only the sockets that exist when the job
//! starts, so the isolated tier's supervisor checks every `connect` and addressed send in
//! the job's mount namespace. A late listener outside the writable places (a python3
//! listener, a real tmux server) is refused and named, also through a relative path or a
//! symlink in the workspace; a datagram socket gets nothing; `--allow-unix-socket` lets it
//! through; the job's own sockets (private `/tmp`, `/dev/shm`, workspace) and TCP work
//! silently; a profile file (the filter attached in the child) is supervised the same way;
//! abstract names of processes outside the job are refused, its own reached. Controls: the
//! same late socket reached with `--isolation off --landlock off`. As root and as uid 65534,
//! a dynamic and a static program, through `bash -c`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::contained::{compile_c, owned_dir, text};
use common::unix_listener::{listener, suffixed, wait_for};
use common::{command, As, BOTH, SANDBOX};

/// `late stream PATH`: connects to PATH and prints `stream 0 <answer>` or `stream ERRNO`;
/// `late dgram PATH`: sends a datagram to PATH, prints `dgram ERRNO` (0: sent);
/// `late own PATH`: binds a stream and a datagram socket at PATH and PATH.d, reaches both,
/// prints `own 0` or the failing step and errno.
const LATE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
static struct sockaddr_un at(const char *p) {
    struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
    strncpy(a.sun_path, p, sizeof a.sun_path - 1);
    return a;
}
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    struct sockaddr_un a = at(argv[2]);
    if (!strcmp(argv[1], "stream")) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(s, (void *)&a, sizeof a) < 0) { printf("stream %d\n", errno); return 0; }
        char buf[16] = {0};
        ssize_t n = read(s, buf, sizeof buf - 1);
        printf("stream 0 %s\n", n > 0 ? buf : "");
    } else if (!strcmp(argv[1], "dgram")) {
        int s = socket(AF_UNIX, SOCK_DGRAM, 0);
        int r = sendto(s, "late", 4, 0, (void *)&a, sizeof a);
        printf("dgram %d\n", r < 0 ? errno : 0);
    } else {
        int l = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(l, (void *)&a, sizeof a) < 0) { printf("own bind %d\n", errno); return 0; }
        listen(l, 4);
        if (connect(c, (void *)&a, sizeof a) < 0) { printf("own connect %d\n", errno); return 0; }
        char d[120]; snprintf(d, sizeof d, "%s.d", argv[2]);
        struct sockaddr_un b = at(d);
        int r = socket(AF_UNIX, SOCK_DGRAM, 0), w = socket(AF_UNIX, SOCK_DGRAM, 0);
        if (bind(r, (void *)&b, sizeof b) < 0) { printf("own dbind %d\n", errno); return 0; }
        if (sendto(w, "x", 1, 0, (void *)&b, sizeof b) < 0) { printf("own sendto %d\n", errno); return 0; }
        char x; if (recv(r, &x, 1, 0) != 1) { printf("own recv %d\n", errno); return 0; }
        printf("own 0\n");
    }
    return 0;
}
"#;

/// The dynamic and the static build of [`LATE_C`], in a directory every user may read.
fn programs(dir: &Path) -> [PathBuf; 2] {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    [
        compile_c(dir, "late", LATE_C, false),
        compile_c(dir, "late-static", LATE_C, true),
    ]
}

/// The listener's log once it has something (a datagram arrives after its sender exits), or
/// empty after 2 s.
/// The run's stderr names the refused socket with the narrowest change that allows it.
fn assert_named(who: As, o: &std::process::Output, sock: &str) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("to allow: --allow-unix-socket {sock}")),
        "{who:?}: {}",
        text(o)
    );
}

fn log_of(path: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let got = fs::read_to_string(suffixed(path, ".log")).unwrap_or_default();
        if !got.is_empty() || Instant::now() > until {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `sandbox run --allow-root ARGS -- bash -c SCRIPT` as `who` in `ws`, where SCRIPT
/// first touches `started`, then waits for `go`; returns once the job has started.
fn start(who: As, ws: &Path, args: &[&str], script: &str) -> Child {
    for f in ["started", "go"] {
        let _ = fs::remove_file(ws.join(f));
    }
    let script = format!("touch started; while [ ! -e go ]; do sleep 0.02; done; {script}");
    let child = command(who, SANDBOX)
        .arg("run")
        .arg("--allow-root")
        .args(args)
        .args(["--", "bash", "-c", &script])
        .current_dir(ws)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&ws.join("started"));
    child
}

/// Lets the job started by [`start`] go on, and waits for its end.
fn finish(ws: &Path, job: Child) -> Output {
    fs::write(ws.join("go"), "").unwrap();
    job.wait_with_output().unwrap()
}

/// The three ways each late-socket run is made: the control (no namespaces, no Landlock: the
/// socket answers), the isolated tier (refused), and the isolated tier with the socket named.
fn ways<'a>(named: &'a [&'a str]) -> [(&'static str, Vec<&'a str>); 3] {
    let mut allow = Vec::new();
    for n in named {
        allow.extend(["--allow-unix-socket", *n]);
    }
    [
        ("control", vec!["--isolation", "off", "--landlock", "off"]),
        ("isolated", vec![]),
        ("named", allow),
    ]
}

#[test]
fn a_socket_bound_after_the_job_started_is_refused_and_named() {
    let bin = owned_dir(As::Root, "late-bin");
    let progs = programs(bin.path());
    for who in BOTH {
        let out = owned_dir(who, "late-out");
        let ws = owned_dir(who, "late-ws");
        let stream = out.path().join("service.sock");
        let dgram = out.path().join("journal.sock");
        let (stream_s, dgram_s) = (stream.display().to_string(), dgram.display().to_string());
        for prog in &progs {
            let prog_s = prog.display().to_string();
            let is_static = prog_s.ends_with("static");
            let script = format!("{prog_s} stream {stream_s}; {prog_s} dgram {dgram_s}");
            for (how, extra) in ways(&[&stream_s, &dgram_s]) {
                let label = format!(
                    "{who:?} {} {how}",
                    if is_static { "static" } else { "dynamic" }
                );
                let mut args = vec!["--profile", "shell-network"];
                if is_static {
                    args.extend(["--static-binary", "confine"]);
                }
                args.extend(extra);
                let job = start(who, ws.path(), &args, &script);
                // Bound only now, while the job runs: the view could not cover them.
                let _l1 = listener(who, &stream, false);
                let _l2 = listener(who, &dgram, true);
                let o = finish(ws.path(), job);
                let stdout = String::from_utf8_lossy(&o.stdout);
                let stderr = String::from_utf8_lossy(&o.stderr);
                assert!(o.status.success(), "{label}: {}", text(&o));
                if how == "isolated" {
                    let e = libc::EACCES;
                    assert!(
                        stdout.contains(&format!("stream {e}\ndgram {e}\n")),
                        "{label}: {}",
                        text(&o)
                    );
                    assert_eq!(
                        log_of(&stream),
                        "",
                        "{label}: the late listener was reached"
                    );
                    assert_eq!(log_of(&dgram), "", "{label}: the datagram arrived");
                    for (call, path) in [("connect", &stream_s), ("sendto", &dgram_s)] {
                        assert!(
                            stderr.lines().any(|l| l.starts_with("sandbox:")
                                && l.contains(&format!("refused {call} "))
                                && l.contains(&format!("to allow: --allow-unix-socket {path}"))),
                            "{label} {call}: {}",
                            text(&o)
                        );
                    }
                } else {
                    assert!(
                        stdout.contains("stream 0 pong\ndgram 0\n"),
                        "{label}: {}",
                        text(&o)
                    );
                    assert_eq!(log_of(&stream), "connected\n", "{label}");
                    assert_eq!(log_of(&dgram), "late\n", "{label}");
                    if how == "named" && !is_static {
                        assert!(stderr.is_empty(), "{label}: {}", text(&o));
                    }
                }
            }
        }
    }
}

#[test]
fn relative_paths_and_symlinks_to_a_late_socket_are_refused() {
    for who in BOTH {
        let out = owned_dir(who, "late-rel-out");
        let ws = owned_dir(who, "late-rel-ws");
        let sock = out.path().join("agent.sock");
        let sock_s = sock.display().to_string();
        // A symlink in the workspace, dangling until the socket is bound, and a relative
        // path climbing out of the workspace.
        std::os::unix::fs::symlink(&sock, ws.path().join("link")).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::lchown(ws.path().join("link"), Some(65534), Some(65534)).unwrap();
        }
        let up = format!(
            "../{}/agent.sock",
            out.path().file_name().unwrap().to_string_lossy()
        );
        let code = format!(
            "import socket\n\
             for p in ['link', './link', '{up}', '{ws}/link']:\n\
             \x20   s = socket.socket(socket.AF_UNIX)\n\
             \x20   try:\n\
             \x20       s.connect(p); print(p, 'reached', s.recv(4).decode())\n\
             \x20   except OSError as e:\n\
             \x20       print(p, 'errno', e.errno)\n",
            ws = ws.path().display()
        );
        for (how, extra) in ways(&[]) {
            if how == "named" {
                continue;
            }
            let mut args = vec!["--profile", "shell-network"];
            args.extend(extra);
            let job = start(who, ws.path(), &args, &format!("python3 -c \"{code}\""));
            let _l = listener(who, &sock, false);
            let o = finish(ws.path(), job);
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "{who:?} {how}: {}", text(&o));
            let answers: Vec<&str> = stdout.lines().collect();
            assert_eq!(answers.len(), 4, "{who:?} {how}: {}", text(&o));
            for line in answers {
                if how == "control" {
                    assert!(
                        line.ends_with("reached pong"),
                        "{who:?} control: {}",
                        text(&o)
                    );
                } else {
                    assert!(line.ends_with("errno 13"), "{who:?}: {}", text(&o));
                }
            }
            if how == "isolated" {
                assert_eq!(log_of(&sock), "", "{who:?}: the late socket was reached");
                // Named by the socket's own path, whatever path led to it.
                assert_named(who, &o, &sock_s);
            }
        }
    }
}

#[test]
fn a_tmux_server_started_after_the_job_cannot_be_listed() {
    for who in BOTH {
        let out = owned_dir(who, "late-tmux-out");
        let ws = owned_dir(who, "late-tmux-ws");
        let sock = out.path().join("tmux.sock");
        let sock_s = sock.display().to_string();
        let script = format!("tmux -S {sock_s} ls; echo tmux $?");
        for (how, extra) in ways(&[]) {
            if how == "named" {
                continue;
            }
            let mut args = vec!["--profile", "shell-network"];
            args.extend(extra);
            let job = start(who, ws.path(), &args, &script);
            // uid 65534's login shell is nologin: the session's command needs a shell.
            let st = command(who, "tmux")
                .env("SHELL", "/bin/sh")
                .args([
                    "-S",
                    &sock_s,
                    "new-session",
                    "-d",
                    "-s",
                    "late",
                    "sleep 120",
                ])
                .status()
                .unwrap();
            assert!(st.success(), "{who:?}: tmux server");
            let o = finish(ws.path(), job);
            let _ = command(who, "tmux")
                .args(["-S", &sock_s, "kill-server"])
                .status();
            let stdout = String::from_utf8_lossy(&o.stdout);
            if how == "control" {
                assert!(
                    stdout.contains("late: 1 windows") && stdout.contains("tmux 0"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert!(
                    stdout.contains("tmux 1") && !stdout.contains("late:"),
                    "{who:?}: {}",
                    text(&o)
                );
                assert_named(who, &o, &sock_s);
            }
        }
    }
}

#[test]
fn the_jobs_own_sockets_and_tcp_work_silently() {
    let bin = owned_dir(As::Root, "late-own-bin");
    let progs = programs(bin.path());
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in tcp.incoming() {
            drop(s);
        }
    });
    for who in BOTH {
        let ws = owned_dir(who, "late-own-ws");
        let ws_s = ws.path().display().to_string();
        for prog in &progs {
            let prog_s = prog.display().to_string();
            let is_static = prog_s.ends_with("static");
            let mut script = String::from("mkdir -p /tmp/d sub; ");
            for path in [
                "/tmp/own".to_string(),
                "/dev/shm/own".to_string(),
                format!("{ws_s}/own"),
                "sub/../rel".to_string(),
            ] {
                script.push_str(&format!("{prog_s} own {path}; "));
            }
            // Through a symlink in the workspace to the job's own socket in its /tmp, and
            // through a relative path from its /tmp.
            script.push_str(&format!(
                "ln -sf /tmp/p link; cd /tmp/d && {prog_s} own ../inner; cd {ws_s}; \
                 python3 -c \"import socket; l = socket.socket(socket.AF_UNIX); l.bind('/tmp/p'); \
                 l.listen(1); c = socket.socket(socket.AF_UNIX); c.connect('{ws_s}/link'); \
                 c2 = socket.socket(socket.AF_UNIX); c2.connect('link'); \
                 socket.create_connection(('127.0.0.1', {port}), 5); print('python 0')\""
            ));
            let mut args = vec!["run", "--allow-root", "--profile", "shell-network"];
            if is_static {
                args.extend(["--static-binary", "confine"]);
            }
            args.extend(["--", "bash", "-c", &script]);
            let _ = fs::remove_file(ws.path().join("link"));
            let o = command(who, SANDBOX)
                .args(&args)
                .current_dir(ws.path())
                .output()
                .unwrap();
            let label = format!("{who:?} {}", if is_static { "static" } else { "dynamic" });
            assert!(o.status.success(), "{label}: {}", text(&o));
            let stdout = String::from_utf8_lossy(&o.stdout);
            assert_eq!(
                stdout,
                "own 0\nown 0\nown 0\nown 0\nown 0\npython 0\n",
                "{label}: {}",
                text(&o)
            );
            if !is_static {
                assert!(o.stderr.is_empty(), "{label}: {}", text(&o));
            }
            for f in ["own", "own.d", "rel", "rel.d", "link"] {
                let _ = fs::remove_file(ws.path().join(f));
            }
        }
    }
}

#[test]
fn abstract_names_outside_the_job_are_refused_and_its_own_are_reached() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("late-abstract-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let host = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    std::thread::spawn(move || {
        for s in host.incoming() {
            drop(s);
        }
    });
    // The job's own abstract listener, then the host's.
    let code = format!(
        "import socket\n\
         l = socket.socket(socket.AF_UNIX); l.bind('\\0own-{name}'); l.listen(1)\n\
         for n in ['own-{name}', '{name}']:\n\
         \x20   c = socket.socket(socket.AF_UNIX)\n\
         \x20   try:\n\
         \x20       c.connect('\\0' + n); print(n[:3], 0)\n\
         \x20   except OSError as e:\n\
         \x20       print(n[:3], e.errno)\n"
    );
    for who in BOTH {
        let ws = owned_dir(who, "late-abs-ws");
        for (how, extra, want) in [
            (
                "control",
                &["--isolation", "off", "--landlock", "off"][..],
                "own 0\nlat 0\n".to_string(),
            ),
            // Sharing the host's network namespace: its own names (held by a process of its
            // PID namespace) are reached, the host's are refused and named.
            ("shared", &[][..], format!("own 0\nlat {}\n", libc::EPERM)),
            // In its own: its names are its own, the host's are not there.
            (
                "own",
                &["--network", "none"][..],
                format!("own 0\nlat {}\n", libc::ECONNREFUSED),
            ),
        ] {
            let o = command(who, SANDBOX)
                .args(["run", "--allow-root", "--profile", "shell-network"])
                .args(extra)
                .args(["--", "bash", "-c", &format!("python3 -c \"{code}\"")])
                .current_dir(ws.path())
                .output()
                .unwrap();
            assert!(o.status.success(), "{who:?} {how}: {}", text(&o));
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                want,
                "{who:?} {how}: {}",
                text(&o)
            );
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                stderr.contains("abstract unix sockets of processes outside the sandbox"),
                how == "shared",
                "{who:?} {how}: {}",
                text(&o)
            );
        }
    }
}

#[test]
fn a_profile_file_gets_the_same_supervision() {
    // A profile file refusing a loader call: the child attaches the outer filter, carrying
    // the claims, and hands its listener to the host (in namespaces, uid 65534 may take it);
    // the preload stacks the exact filter.
    let bin = owned_dir(As::Root, "late-custom-bin");
    let prog = programs(bin.path())[0].display().to_string();
    let profile = bin.path().join("custom.toml");
    fs::write(
        &profile,
        "description = \"shell-network without statfs\"\n\
         allow = [\"@base\", \"@fd-io\", \"@fs-read\", \"@fs-write\", \"@threads\", \
         \"@process\", \"@exec\", \"@network\"]\n\
         deny = [\"@hardening\", \"statfs\"]\n",
    )
    .unwrap();
    fs::set_permissions(&profile, fs::Permissions::from_mode(0o644)).unwrap();
    let profile_s = profile.display().to_string();
    for who in BOTH {
        let out = owned_dir(who, "late-custom-out");
        let ws = owned_dir(who, "late-custom-ws");
        let sock = out.path().join("late.sock");
        let sock_s = sock.display().to_string();
        for (how, extra) in ways(&[]) {
            // uid 65534 may not take a changed profile's listener without namespaces: its
            // control run is refused (named), so the control is root's.
            if how == "named" || (how == "control" && who == As::Nobody) {
                continue;
            }
            let mut args = vec!["--profile", &profile_s];
            args.extend(extra);
            let job = start(who, ws.path(), &args, &format!("{prog} stream {sock_s}"));
            let _l = listener(who, &sock, false);
            let o = finish(ws.path(), job);
            let stdout = String::from_utf8_lossy(&o.stdout);
            if how == "control" {
                assert!(
                    stdout.contains("stream 0 pong"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert!(
                    stdout.contains(&format!("stream {}", libc::EACCES)),
                    "{who:?}: {}",
                    text(&o)
                );
                assert_eq!(log_of(&sock), "", "{who:?}: the late socket was reached");
                assert_named(who, &o, &sock_s);
            }
        }
    }
}

#[test]
fn root_without_capabilities_keeps_the_sockets_mode_bits() {
    // A job of root holds no capability in its user namespace: a socket of another user's
    // with mode 0700, in the workspace, stays closed to it, although the host (root, every
    // capability) makes the connect. Control: root without the namespaces reaches it.
    let ws = owned_dir(As::Root, "late-mode-ws");
    fs::set_permissions(ws.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let sock = ws.path().join("theirs.sock");
    let _l = listener(As::Nobody, &sock, false);
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o700)).unwrap();
    let code = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('{}'); print('reached')\n\
         except OSError as e:\n    print('errno', e.errno)\n",
        sock.display()
    );
    for (how, extra, want) in [
        (
            "control",
            &["--isolation", "off", "--landlock", "off"][..],
            "reached\n".to_string(),
        ),
        ("isolated", &[][..], format!("errno {}\n", libc::EACCES)),
    ] {
        let o = command(As::Root, SANDBOX)
            .args(["run", "--allow-root", "--profile", "shell-network"])
            .args(extra)
            .args(["--", "python3", "-c", &code])
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            want,
            "{how}: {}",
            text(&o)
        );
    }
}

/// The job's own datagram socket with a descriptor passed (`SCM_RIGHTS`) and its credentials
/// (`SCM_CREDENTIALS`), then credentials it may not claim (another process, another user); the
/// socket at `argv[1]`, in `/tmp`.
const OWN_DGRAM_PY: &str = r#"
import array, os, socket, struct, sys
path = sys.argv[1]
r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); r.bind(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
f = open('data', 'rb')
s.sendmsg([b'fd'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [f.fileno()]))], 0, path)
msg, anc, _, _ = r.recvmsg(10, socket.CMSG_SPACE(4))
fds = array.array('i'); fds.frombytes(anc[0][2])
print('passed', msg, os.read(fds[0], 7))
r.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
for name, pid, uid in [('own', os.getpid(), os.getuid()), ('other-process', 1, os.getuid()),
                       ('other-user', os.getpid(), 4242)]:
    creds = struct.pack('iII', pid, uid, os.getgid())
    try:
        s.sendmsg([b'cred'], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)], 0, path)
        msg, anc, _, _ = r.recvmsg(10, 64)
        got = struct.unpack('iII', anc[0][2])
        print(name, 'sent', got[1] == uid, got[0] in (pid, 0))
    except OSError as e:
        print(name, 'errno', e.errno)
"#;

#[test]
fn the_jobs_own_datagrams_keep_descriptors_and_credentials() {
    let path = format!("/tmp/late-dgram-{}.sock", std::process::id());
    for who in BOTH {
        let ws = owned_dir(who, "late-dgram-ws");
        fs::write(ws.path().join("data"), "payload").unwrap();
        let outs: Vec<String> = [&["--isolation", "off", "--landlock", "off"][..], &[][..]]
            .iter()
            .map(|tier| {
                let o = command(who, SANDBOX)
                    .args(["run", "--allow-root", "--profile", "shell-network"])
                    .args(*tier)
                    .args(["--", "python3", "-c", OWN_DGRAM_PY, &path])
                    .current_dir(ws.path())
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{who:?} {tier:?}: {}", text(&o));
                assert!(o.stderr.is_empty(), "{who:?} {tier:?}: {}", text(&o));
                String::from_utf8_lossy(&o.stdout).into_owned()
            })
            .collect();
        let e = libc::EPERM;
        // The isolated tier gives what the kernel gives a sender of this user without
        // capabilities (the control, as uid 65534); root's control holds them all.
        let want = format!(
            "passed b'fd' b'payload'\nown sent True True\nother-process errno {e}\n\
             other-user errno {e}\n"
        );
        assert_eq!(outs[1], want, "{who:?}");
        if who == As::Nobody {
            assert_eq!(outs[0], outs[1], "{who:?}: the control");
        }
        // /tmp is the host's own in the control.
        let _ = fs::remove_file(&path);
    }
}
