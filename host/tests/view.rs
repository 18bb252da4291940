//! The constructed view of the machine (docs/isolation.md), through `sandbox run`, as root
//! and as uid 65534: each attack of the second review (metadata changes outside the
//! workspace, other terminals of the user, unix-socket services outside the sandbox: a real
//! tmux server, a real ssh-agent, a datagram socket, a listener shaped like
//! `/var/run/docker.sock`) beside a control that shows it works with `--isolation off`.
//! Landlock is off in the attacks unless said otherwise, so that the view alone is what
//! stops them (Landlock has no rights for chmod, utimensat, setxattr or connect).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::unix_listener::{listener, wait_for, Killed};
use common::{command, As, BOTH, SANDBOX};

/// `sandbox run ARGS` as `who` in `cwd`: Landlock off unless ARGS name it.
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    let mut c = command(who, SANDBOX);
    c.arg("run").arg("--allow-root");
    if !args.contains(&"--landlock") {
        c.args(["--landlock", "off"]);
    }
    c.args(args).current_dir(cwd).output().expect("sandbox run")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A directory `who` owns, outside `/tmp` (which the view replaces), removed on drop.
fn owned_dir(who: As, prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(d.path(), Some(65534), Some(65534)).unwrap();
    }
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A world-writable workspace, removed on drop.
fn workspace() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("view-ws")
        .tempdir_in("/var/tmp")
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// A python client line that reaches the socket at `path` (stream: prints the answer;
/// datagram: sends one) and exits 0 only if it did.
fn client(path: &Path, datagram: bool) -> String {
    if datagram {
        format!(
            "import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); \
             s.sendto(b'leak', '{}'); print('sent')",
            path.display()
        )
    } else {
        format!(
            "import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); \
             print(s.recv(10).decode())",
            path.display()
        )
    }
}

fn log_of(path: &Path) -> String {
    fs::read_to_string(format!("{}.log", path.display())).unwrap_or_default()
}

/// The listener's log once it differs from `before` (a datagram is logged after the sender
/// has exited), or as it is after 10 s.
fn log_after(path: &Path, before: &str) -> String {
    let start = Instant::now();
    loop {
        let now = log_of(path);
        if now != before || start.elapsed() > Duration::from_secs(10) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unix_sockets_outside_the_workspace_are_hidden_unless_named() {
    for who in BOTH {
        let dir = owned_dir(who, "view-sock");
        let run_dir = dir.path().join("run");
        fs::create_dir(&run_dir).unwrap();
        fs::set_permissions(&run_dir, fs::Permissions::from_mode(0o777)).unwrap();
        let docker = run_dir.join("docker.sock");
        let dgram = run_dir.join("journal.sock");
        let _l1 = listener(who, &docker, false);
        let _l2 = listener(who, &dgram, true);
        let ws = workspace();
        for (sock, datagram) in [(&docker, false), (&dgram, true)] {
            let code = client(sock, datagram);
            // Control: without the namespaces the socket answers.
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    "off",
                    "--profile",
                    "shell-network",
                    "--",
                    "python3",
                    "-c",
                    &code,
                ],
            );
            assert!(o.status.success(), "{who:?} control: {}", text(&o));
            let before = log_after(sock, "");
            assert!(
                !before.is_empty(),
                "{who:?}: the control reached the socket"
            );
            for profile in ["network", "shell-network", "no-exec"] {
                for net in [&["--network", "none"][..], &[][..]] {
                    let mut args = vec!["--profile", profile];
                    args.extend_from_slice(net);
                    args.extend(["--", "python3", "-c", &code]);
                    let o = run(who, ws.path(), &args);
                    assert!(
                        !o.status.success(),
                        "{who:?} {profile} {net:?}: reached {}: {}",
                        sock.display(),
                        text(&o)
                    );
                    assert!(
                        String::from_utf8_lossy(&o.stderr).contains("ConnectionRefused"),
                        "{who:?} {profile}: {}",
                        text(&o)
                    );
                    assert_eq!(log_of(sock), before, "{who:?} {profile}: the socket saw it");
                }
            }
            // Named by the caller, it stays reachable.
            let allowed = sock.display().to_string();
            let o = run(
                who,
                ws.path(),
                &[
                    "--profile",
                    "shell-network",
                    "--allow-unix-socket",
                    &allowed,
                    "--",
                    "python3",
                    "-c",
                    &code,
                ],
            );
            assert!(o.status.success(), "{who:?} allowed: {}", text(&o));
            assert_ne!(
                log_after(sock, &before),
                before,
                "{who:?}: the allowed socket was reached"
            );
        }
        // A socket the job makes in its workspace is its own to use.
        let code = "import socket, os\n\
            s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen(1)\n\
            c = socket.socket(socket.AF_UNIX); c.connect('own.sock'); print('own ok')";
        let o = run(
            who,
            ws.path(),
            &["--profile", "shell-network", "--", "python3", "-c", code],
        );
        assert!(o.status.success(), "{who:?} own socket: {}", text(&o));
    }
}

#[test]
fn a_tmux_server_of_the_user_cannot_be_driven() {
    for who in BOTH {
        let dir = owned_dir(who, "view-tmux");
        let sock = dir.path().join("tmux.sock");
        let sock_s = sock.display().to_string();
        // SHELL: uid 65534's login shell is nologin, which would end the session at once.
        let st = command(who, "tmux")
            .env("SHELL", "/bin/sh")
            .args([
                "-S",
                &sock_s,
                "new-session",
                "-d",
                "-s",
                "victim",
                "sleep 300",
            ])
            .status()
            .unwrap();
        assert!(st.success(), "{who:?}: tmux server");
        let windows = || {
            let o = command(who, "tmux")
                .args(["-S", &sock_s, "list-windows", "-t", "victim"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).lines().count()
        };
        let ws = workspace();
        let attack = [
            "--",
            "tmux",
            "-S",
            &sock_s,
            "new-window",
            "-t",
            "victim",
            "sleep 300",
        ];
        // Control: without the namespaces a new window appears.
        let mut args = vec!["--isolation", "off", "--profile", "shell-network"];
        args.extend(attack);
        let o = run(who, ws.path(), &args);
        assert!(o.status.success(), "{who:?} control: {}", text(&o));
        assert_eq!(windows(), 2, "{who:?}: the control opened a window");
        for profile in ["shell-network", "shell"] {
            let mut args = vec!["--profile", profile, "--landlock", "preferred"];
            args.extend(attack);
            let o = run(who, ws.path(), &args);
            assert!(!o.status.success(), "{who:?} {profile}: {}", text(&o));
            assert_eq!(windows(), 2, "{who:?} {profile}: no window was opened");
        }
        let _ = command(who, "tmux")
            .args(["-S", &sock_s, "kill-server"])
            .status();
    }
}

#[test]
fn an_ssh_agent_named_on_the_command_line_lists_no_keys() {
    for who in BOTH {
        // The agent's usual place: a directory in /tmp, named on the command line (which
        // keeps the directory visible in the private /tmp).
        let dir = tempfile::Builder::new()
            .prefix("view-agent")
            .tempdir_in("/tmp")
            .unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
        }
        let sock = dir.path().join("agent.sock");
        let sock_s = sock.display().to_string();
        let key = dir.path().join("id_test");
        let st = command(who, "ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(st.success());
        let agent = Killed(
            command(who, "ssh-agent")
                .args(["-D", "-a", &sock_s])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for(&sock);
        let st = command(who, "ssh-add")
            .arg(&key)
            .env("SSH_AUTH_SOCK", &sock)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{who:?}: key added");
        let ws = workspace();
        let line = format!("SSH_AUTH_SOCK={sock_s} ssh-add -l");
        let control = run(
            who,
            ws.path(),
            &[
                "--isolation",
                "off",
                "--profile",
                "shell-network",
                "--",
                "bash",
                "-c",
                &line,
                &sock_s,
            ],
        );
        assert!(
            String::from_utf8_lossy(&control.stdout).contains("ED25519"),
            "{who:?} control: {}",
            text(&control)
        );
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell-network",
                "--landlock",
                "preferred",
                "--",
                "bash",
                "-c",
                &line,
                &sock_s,
            ],
        );
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("ED25519"),
            "{who:?}: the agent's keys were listed: {}",
            text(&o)
        );
        drop(agent);
    }
}

/// A C program that changes the mode, times and an extended attribute of `argv[1]`, each
/// reported on one line (`chmod 0`, `utimensat 30`...: the errno).
const METADATA_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
int main(int argc, char **argv) {
    int bad = 0;
    int rc = chmod(argv[1], 04777);
    printf("chmod %d\n", rc ? errno : 0); bad |= rc == 0;
    struct timespec t[2] = {{1, 0}, {1, 0}};
    rc = utimensat(AT_FDCWD, argv[1], t, 0);
    printf("utimensat %d\n", rc ? errno : 0); bad |= rc == 0;
    rc = setxattr(argv[1], "user.planted", "x", 1, 0);
    printf("setxattr %d\n", rc ? errno : 0); bad |= rc == 0;
    return bad ? 0 : 1;
}
"#;

fn metadata_program(dir: &Path, static_link: bool) -> PathBuf {
    let src = dir.join("meta.c");
    fs::write(&src, METADATA_C).unwrap();
    let out = dir.join(if static_link { "meta-static" } else { "meta" });
    let mut c = Command::new("gcc");
    if static_link {
        c.arg("-static");
    }
    let st = c.arg("-o").arg(&out).arg(&src).status().unwrap();
    assert!(st.success(), "gcc");
    fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
    out
}

#[test]
fn metadata_outside_the_writable_places_cannot_change() {
    let progs = owned_dir(As::Root, "view-meta-bin");
    let dynamic = metadata_program(progs.path(), false);
    let fully_static = metadata_program(progs.path(), true);
    for who in BOTH {
        let home = owned_dir(who, "view-meta-home");
        let victim = home.path().join(".bashrc");
        fs::write(&victim, "# rc\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&victim, Some(65534), Some(65534)).unwrap();
        }
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
        let victim_s = victim.display().to_string();
        let ws = workspace();
        for prog in [&dynamic, &fully_static] {
            let prog_s = prog.display().to_string();
            let mut base = vec!["--profile", "shell"];
            if prog == &fully_static {
                base.extend(["--static-binary", "confine"]);
            }
            // Control: without the namespaces (and Landlock) the changes land.
            let mut args = vec!["--isolation", "off"];
            args.extend(&base);
            args.extend(["--", &prog_s, &victim_s]);
            let o = run(who, ws.path(), &args);
            assert!(o.status.success(), "{who:?} control: {}", text(&o));
            let mode = fs::metadata(&victim).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o4777, "{who:?} control mode");
            fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
            assert!(Command::new("touch")
                .arg(&victim)
                .status()
                .unwrap()
                .success());
            // With the view, Landlock off and on: every change refused, nothing changed.
            for landlock in ["off", "preferred"] {
                let mut args = vec!["--landlock", landlock];
                args.extend(&base);
                args.extend(["--", &prog_s, &victim_s]);
                let o = run(who, ws.path(), &args);
                let out = String::from_utf8_lossy(&o.stdout);
                assert!(
                    out.contains(&format!("chmod {}", libc::EROFS)),
                    "{who:?} {landlock}: {}",
                    text(&o)
                );
                assert!(!o.status.success(), "{who:?} {landlock}: {}", text(&o));
                let meta = fs::metadata(&victim).unwrap();
                assert_eq!(
                    meta.permissions().mode() & 0o7777,
                    0o600,
                    "{who:?} {landlock}"
                );
                assert_ne!(
                    std::os::unix::fs::MetadataExt::mtime(&meta),
                    1,
                    "{who:?} {landlock}: times changed"
                );
            }
        }
        // Inside the workspace the same program changes its own file.
        let own = ws.path().join("own");
        fs::write(&own, "x").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
        }
        let own_s = own.display().to_string();
        let dyn_s = dynamic.display().to_string();
        let o = run(who, ws.path(), &["--profile", "shell", "--", &dyn_s, "own"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("chmod 0"),
            "{who:?} own: {} ({own_s})",
            text(&o)
        );
    }
}

#[test]
fn other_terminals_of_the_user_are_not_in_the_view() {
    // A terminal of the user's, held open outside, with a line typed into it and not read
    // yet: its name, then it waits.
    let script = r#"
import os, pty, time
m, s = pty.openpty()
os.write(m, b"secret-typed\n")
print(os.ttyname(s), flush=True)
time.sleep(60)
"#;
    for who in BOTH {
        for isolation in ["off", "preferred"] {
            let mut holder = Killed(
                command(who, "python3")
                    .args(["-c", script])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            let mut out = holder.0.stdout.take().unwrap();
            let mut name = String::new();
            {
                use std::io::Read;
                let mut b = [0u8; 1];
                while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
                    name.push(b[0] as char);
                }
            }
            assert!(name.starts_with("/dev/pts/"), "{name}");
            let ws = workspace();
            let input = format!("if={name}");
            // Under `minimal`, the most restrictive profile: reading what was typed there.
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    isolation,
                    "--profile",
                    "minimal",
                    "--timeout",
                    "20",
                    "--",
                    "dd",
                    &input,
                    "bs=13",
                    "count=1",
                    "status=none",
                ],
            );
            drop(holder);
            let stdout = String::from_utf8_lossy(&o.stdout);
            if isolation == "off" {
                assert!(
                    stdout.contains("secret-typed"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert!(
                    !stdout.contains("secret-typed"),
                    "{who:?}: read {name}: {}",
                    text(&o)
                );
                assert!(
                    String::from_utf8_lossy(&o.stderr).contains("No such file"),
                    "{who:?}: {}",
                    text(&o)
                );
            }
        }
    }
}

#[test]
fn the_job_gets_its_own_dev_shm_and_terminals() {
    for who in BOTH {
        let ws = workspace();
        let line = "echo x > /dev/shm/mine && ls /dev/shm && ls /dev/pts && \
                    python3 -c 'import os; m, s = os.openpty(); print(os.ttyname(s))' && \
                    python3 -c 'import multiprocessing as m; print(m.Pool(2).map(abs, [-3]))'";
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell",
                "--landlock",
                "preferred",
                "--",
                "bash",
                "-c",
                line,
            ],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        assert!(out.contains("mine"), "{who:?}: {}", text(&o));
        assert!(out.contains("/dev/pts/0"), "{who:?}: {}", text(&o));
        assert!(out.contains("[3]"), "{who:?}: {}", text(&o));
        assert!(
            !Path::new("/dev/shm/mine").exists(),
            "the job's /dev/shm is its own"
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).is_empty(),
            "{who:?}: nothing on stderr: {}",
            text(&o)
        );
    }
}

#[test]
fn hostile_allowed_sockets_are_refused_naming_the_field() {
    let ws = workspace();
    for path in ["relative/sock", "", "/a\nb"] {
        let o = run(
            As::Root,
            ws.path(),
            &["--allow-unix-socket", path, "--", "/bin/true"],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{path:?}: {err}");
        assert!(err.contains("--allow-unix-socket"), "{err}");
        assert!(err.contains("absolute"), "{err}");
    }
    for body in [
        r#"{"argv":["/bin/true"],"allow_unix_sockets":["/tmp/a\u0000b"]}"#,
        r#"{"argv":["/bin/true"],"allow_unix_sockets":["rel"]}"#,
        r#"{"argv":["/bin/true"],"allow_unix_sockets":"/run/x.sock"}"#,
    ] {
        let o = common::output_with_input(
            command(As::Root, SANDBOX).args(["exec", "--json"]),
            body.as_bytes(),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("allow_unix_sockets"), "{body}: {out}");
        assert!(out.contains("\"error\""), "{body}: {out}");
    }
}

#[test]
fn inotify_instances_and_terminals_are_bounded_per_job() {
    // Counts how many inotify instances and terminals the job can open (up to 100 each).
    let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fds = []
n = 0
while n < 100:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd); n += 1
for fd in fds:
    os.close(fd)
ptys = []
while len(ptys) < 100:
    try:
        ptys.append(os.openpty())
    except OSError:
        break
print(n, len(ptys))
"#;
    for who in BOTH {
        let ws = workspace();
        let counts = |isolation: &str| {
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    isolation,
                    "--profile",
                    "shell",
                    "--",
                    "python3",
                    "-c",
                    code,
                ],
            );
            assert!(o.status.success(), "{who:?} {isolation}: {}", text(&o));
            let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
            let v: Vec<u32> = out.split(' ').map(|n| n.parse().unwrap()).collect();
            (v[0], v[1])
        };
        // Control: without the namespaces the user's own limits are all there is.
        let (inotify, ptys) = counts("off");
        assert!(
            inotify > 32 && ptys > 64,
            "{who:?} control: {inotify} {ptys}"
        );
        let (inotify, ptys) = counts("preferred");
        assert_eq!((inotify, ptys), (32, 64), "{who:?}");
    }
}

/// A socket of another user in a directory only that user may search (a session daemon's,
/// `/run/user/UID/bus`) cannot be covered by root's view, whose root is not the host's; the
/// job cannot reach it either, so root's run goes on (it failed whole: "mounting in the new
/// mount namespace: Permission denied"). Control: the host's root reaches it.
#[test]
fn another_users_socket_in_a_private_directory_does_not_stop_roots_runs() {
    let private = owned_dir(As::Nobody, "view-private");
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let sock = private.path().join("daemon.sock");
    let _l = listener(As::Nobody, &sock, false);
    let ws = workspace();
    let o = Command::new("python3")
        .args(["-c", &client(&sock, false)])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "pong\n",
        "control: {o:?}"
    );
    let o = run(
        As::Root,
        ws.path(),
        &[
            "--profile",
            "shell-network",
            "--landlock",
            "preferred",
            "--",
            "sh",
            "-c",
            &format!("echo ran; python3 -c \"{}\"", client(&sock, false)),
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.starts_with("ran\n"), "{}", text(&o));
    assert!(!out.contains("pong"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o)
    );
}
