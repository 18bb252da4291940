//! Unix sockets in the contained tier (Landlock and seccomp, no namespaces: `--isolation off`)
//! under the network profiles: a pathname socket outside the writable places (the user's
//! ssh-agent, a tmux server) cannot be connected to unless the request names it; the job's own
//! sockets in the workspace, the named ones and TCP under the port rule still work
//! (docs/isolation.md, "Unix sockets in the contained tier"). Controls in the filtered tier
//! (`--landlock off` as well). Real ssh-agent and tmux, as root and as uid 65534.

use std::fs;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::contained::{compile_c, owned_dir, text};
use common::{command, As, BOTH};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(p: &Path) {
    let until = Instant::now() + Duration::from_secs(10);
    while !p.exists() {
        assert!(Instant::now() < until, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_users_agent_and_tmux_are_out_of_reach_unless_named() {
    for who in BOTH {
        let out = owned_dir(who, "contained-sock-out");
        let ws = owned_dir(who, "contained-sock-ws");
        let agent = out.path().join("agent.sock");
        let tmux = out.path().join("tmux.sock");
        let agent_s = agent.display().to_string();
        let tmux_s = tmux.display().to_string();
        let _agent = Killed(
            command(who, "ssh-agent")
                .args(["-D", "-a", &agent_s])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // uid 65534's login shell is nologin: the session's command needs a shell that runs.
        let st = command(who, "tmux")
            .env("SHELL", "/bin/sh")
            .args(["-S", &tmux_s, "new-session", "-d", "sleep 120"])
            .status()
            .unwrap();
        assert!(st.success(), "tmux");
        wait_for(&agent);
        wait_for(&tmux);
        let script = format!(
            "SSH_AUTH_SOCK={agent_s} ssh-add -l; echo agent $?; \
             tmux -S {tmux_s} ls >/dev/null; echo tmux $?"
        );
        for landlock in ["off", "preferred"] {
            let o = run(
                who,
                ws.path(),
                &[
                    "--landlock",
                    landlock,
                    "--profile",
                    "shell-network",
                    "--",
                    "bash",
                    "-c",
                    &script,
                ],
            );
            let stdout = String::from_utf8_lossy(&o.stdout);
            if landlock == "off" {
                // Control (filtered tier): both servers answer (ssh-add's 1: no identities).
                assert!(
                    stdout.contains("agent 1") && stdout.contains("tmux 0"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert!(
                    stdout.contains("agent 2") && stdout.contains("tmux 1"),
                    "{who:?}: {}",
                    text(&o)
                );
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains(&format!("to allow: --allow-unix-socket {agent_s}"))
                        && err.contains(&format!("to allow: --allow-unix-socket {tmux_s}")),
                    "{who:?}: {}",
                    text(&o)
                );
                // Named once (tmux's own message names the path too: not again).
                let lines = err
                    .lines()
                    .filter(|l| l.starts_with("sandbox:") && l.contains(&tmux_s))
                    .count();
                assert_eq!(lines, 1, "{who:?}: {}", text(&o));
            }
        }
        // The change the line names lets that socket, and only it, through.
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell-network",
                "--allow-unix-socket",
                &agent_s,
                "--",
                "bash",
                "-c",
                &script,
            ],
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            stdout.contains("agent 1") && stdout.contains("tmux 1"),
            "{who:?} named: {}",
            text(&o)
        );
        let _ = command(who, "tmux")
            .args(["-S", &tmux_s, "kill-server"])
            .status();
    }
}

#[test]
fn own_sockets_tcp_and_abstract_addresses() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
        }
    });
    let script = format!(
        "import socket, os, errno\n\
         s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); s.listen()\n\
         c = socket.socket(socket.AF_UNIX); c.connect('own.sock'); print('own ok')\n\
         c = socket.socket(socket.AF_UNIX); c.connect(os.path.abspath('own.sock')); print('own abs ok')\n\
         t = socket.create_connection(('127.0.0.1', {port})); print('tcp ok')\n\
         a = socket.socket(socket.AF_UNIX); a.bind('\\0contained-own'); a.listen()\n\
         b = socket.socket(socket.AF_UNIX)\n\
         try:\n\
         \x20   b.connect('\\0contained-own'); print('abstract ok')\n\
         except OSError as e:\n\
         \x20   print('abstract', errno.errorcode[e.errno])\n"
    );
    for who in BOTH {
        let ws = owned_dir(who, "contained-own-ws");
        let o = run(
            who,
            ws.path(),
            &["--profile", "shell-network", "--", "python3", "-c", &script],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        for want in ["own ok", "own abs ok", "tcp ok", "abstract EPERM"] {
            assert!(out.contains(want), "{who:?} {want}: {}", text(&o));
        }
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("abstract unix sockets of processes outside the sandbox cannot be reached (without namespaces, not even the job's own"),
            "{who:?}: {}",
            text(&o)
        );
        fs::remove_file(ws.path().join("own.sock")).unwrap();
        // The port rule still holds when the host connects for the job; control: another
        // allowed port.
        for (ports, want) in [("1", "refused"), (&*port.to_string(), "tcp ok")] {
            let o = run(
                who,
                ws.path(),
                &[
                    "--profile",
                    "shell-network",
                    "--connect-ports",
                    ports,
                    "--",
                    "python3",
                    "-c",
                    &format!(
                        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port})); print('tcp ok')\nexcept OSError as e:\n    print('refused', e.errno)"
                    ),
                ],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains(want), "{who:?} ports {ports}: {}", text(&o));
        }
    }
}

/// Hostile `connect` arguments, each call's errno printed.
const HOSTILE_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#define TRY(name, call) { int rc = (call); printf(name " %d\n", rc < 0 ? errno : 0); }
int main(void) {
    int u = socket(AF_UNIX, SOCK_STREAM, 0), i = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
    strcpy(a.sun_path, "no-such.sock");
    char big[4096]; memset(big, 0, sizeof big);
    TRY("bad-fd", connect(9999, (void *)&a, sizeof a));
    TRY("not-socket", connect(0, (void *)&a, sizeof a));
    TRY("null-addr", connect(u, NULL, sizeof a));
    TRY("huge-len", connect(u, (void *)big, sizeof big));
    TRY("family-only", connect(u, (void *)&a, 2));
    TRY("missing", connect(u, (void *)&a, sizeof a));
    TRY("inet-to-unix", connect(i, (void *)&a, sizeof a));
    struct sockaddr_in in; memset(&in, 0, sizeof in); in.sin_family = AF_INET;
    TRY("unix-to-inet", connect(u, (void *)&in, sizeof in));
    TRY("short-inet", connect(i, (void *)&in, 4));
    memset(a.sun_path, 'x', sizeof a.sun_path);
    TRY("unterminated", connect(u, (void *)&a, sizeof a));
    return 0;
}
"#;

#[test]
fn hostile_connect_arguments_get_the_kernels_answers() {
    let bin = owned_dir(As::Root, "contained-sock-hostile");
    let prog = compile_c(bin.path(), "hostile", HOSTILE_C, false);
    let prog_s = prog.display().to_string();
    for who in BOTH {
        let ws = owned_dir(who, "contained-sock-hostile-ws");
        // Control: the kernel's answers (filtered tier); then the host's, in the contained
        // and in the isolated tier (whose supervisor resolves in the job's namespace).
        let outs: Vec<String> = [
            &["--isolation", "off", "--landlock", "off"][..],
            &["--isolation", "off"][..],
            &["--isolation", "required"][..],
        ]
        .iter()
        .map(|tier| {
            let mut args = tier.to_vec();
            args.extend(["--profile", "shell-network", "--", &prog_s]);
            let o = common::contained::run(who, ws.path(), &args);
            assert!(o.status.success(), "{who:?} {tier:?}: {}", text(&o));
            String::from_utf8_lossy(&o.stdout).into_owned()
        })
        .collect();
        assert_eq!(
            outs[0], outs[2],
            "{who:?}: kernel, then the isolated tier's host"
        );
        assert_eq!(outs[0], outs[1], "{who:?}: kernel, then the host");
        assert!(
            outs[1].contains(&format!("missing {}", libc::ENOENT)),
            "{}",
            outs[1]
        );
    }
}

/// `sandbox run --allow-root --isolation off ARGS` (the contained tier) as `who` in `cwd`.
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--isolation", "off"];
    all.extend_from_slice(args);
    common::contained::run(who, cwd, &all)
}
