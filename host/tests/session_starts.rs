//! How a session's filtered command starts (docs/sessions.md, "How a command starts"): the
//! host writes it to the resident's spawner thread, which clones it without waiting for its
//! exec; a step that fails after the clone is answered by the child itself. Tests with real
//! programs, as root and as uid 65534: failures name their step and leave the session
//! working, arguments and variables arrive as given, and many starts at once (more than the
//! spawner's slots) each get their own streams and status.

mod common;

use common::{as_both, SANDBOX};
use sandbox_host::exec::{ExecError, Request};
use sandbox_host::session::{Command, Session, SessionOptions};
use std::os::unix::fs::PermissionsExt;

/// A session of `profile` whose workspace and working directory is `dir`.
fn start(profile: &str, dir: &std::path::Path) -> Session {
    let mut r = Request::builder(["/bin/true"])
        .profile(profile)
        .workspace(dir.to_str().unwrap())
        .cwd(dir.to_str().unwrap())
        .build();
    r.env.insert("PATH".into(), common::PATH.into());
    r.env.insert("LANG".into(), "C.UTF-8".into());
    Session::start(&r, &SessionOptions::new(SANDBOX)).expect("start a session")
}

fn project() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("session-starts")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// An executable file `name` in `dir` holding `body`.
fn executable(dir: &std::path::Path, name: &str, body: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The processes whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[test]
fn a_start_that_fails_after_the_clone_names_its_step_and_leaves_nothing_running() {
    as_both(
        "a_start_that_fails_after_the_clone_names_its_step_and_leaves_nothing_running",
        |who| {
            let dir = project();
            let s = start("shell", dir.path());
            // The resident, whose children the commands are.
            let sleeper = s.spawn(&Command::new(["sleep", "30"])).unwrap();
            let resident = common::parent_of(sleeper.pid());
            // Bytes no kernel loader takes, executable: exec answers ENOEXEC. Control: a real
            // script in the same place runs.
            let bad = executable(dir.path(), "bad", b"\x01\x02\x03garbage");
            let good = executable(dir.path(), "good", b"#!/bin/sh\necho ran\n");
            let e = s
                .spawn(&Command::new([bad.to_str().unwrap()]))
                .expect_err("a program no loader takes");
            match &e {
                ExecError::Spawn { program, source } => {
                    assert_eq!(program, bad.to_str().unwrap(), "{who:?}");
                    assert_eq!(source.raw_os_error(), Some(libc::ENOEXEC), "{who:?}: {e}");
                }
                other => panic!("{who:?}: {other:?}"),
            }
            let r = s
                .spawn(&Command::new([good.to_str().unwrap()]))
                .unwrap()
                .wait();
            assert_eq!(r.stdout, "ran\n", "{who:?}: {r:?}");
            // A program that exists for the host but not in the session's view (its private
            // /tmp hides the host's): the exec step fails with ENOENT. Control: the host runs
            // it.
            let host_tmp = tempfile::Builder::new()
                .prefix("outside")
                .tempdir()
                .unwrap();
            std::fs::set_permissions(host_tmp.path(), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            let hidden = executable(host_tmp.path(), "prog", b"#!/bin/sh\necho outside\n");
            let o = std::process::Command::new(&hidden).output().unwrap();
            assert_eq!(o.stdout, b"outside\n", "{who:?}");
            match s.spawn(&Command::new([hidden.to_str().unwrap()])) {
                Err(ExecError::Spawn { source, .. }) => {
                    assert_eq!(source.raw_os_error(), Some(libc::ENOENT), "{who:?}")
                }
                other => panic!("{who:?}: {other:?}"),
            }
            // A working directory the view does not have: the cwd step, named.
            let e = s
                .spawn(&Command::new(["true"]).cwd(host_tmp.path().to_str().unwrap()))
                .expect_err("a cwd outside the view");
            assert!(
                matches!(&e, ExecError::Setup { .. }) && e.to_string().contains("cwd step"),
                "{who:?}: {e}"
            );
            // Nothing of the failed starts is left: the resident's only child is the sleeper.
            let t = std::time::Instant::now();
            while children(resident) != [sleeper.pid()]
                && t.elapsed() < std::time::Duration::from_secs(5)
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(children(resident), [sleeper.pid()], "{who:?}");
            // And the session goes on.
            let r = s.spawn(&Command::new(["true"])).unwrap().wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
            sleeper.signal(libc::SIGKILL).unwrap();
            let _ = sleeper.wait();
            s.end();
        },
    );
}

#[test]
fn arguments_and_variables_arrive_as_given() {
    as_both("arguments_and_variables_arrive_as_given", |who| {
        let dir = project();
        let s = start("shell", dir.path());
        let show = "import sys, os, json; print(json.dumps([sys.argv[1:], os.environ.get('X'), \
                    os.environ.get('LANG'), os.environ.get('PATH')]))";
        let mut argv: Vec<String> = vec!["python3".into(), "-c".into(), show.into()];
        // (An empty argument is refused by the request's rules, before any start.)
        argv.extend([" a b ", "é ✓", "-x", "=", "\t\n", "'\"$HOME"].map(String::from));
        let r = s
            .spawn(&Command::new(argv.clone()).env("X", "1=2").env("LANG", "C"))
            .unwrap()
            .wait();
        let got: serde_json::Value =
            serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{who:?}: {e}: {r:?}"));
        assert_eq!(
            got,
            serde_json::json!([
                [" a b ", "é ✓", "-x", "=", "\t\n", "'\"$HOME"],
                "1=2",
                "C",
                common::PATH
            ]),
            "{who:?}"
        );
        // The next command has the session's variables again.
        let r = s
            .spawn(&Command::new(["python3", "-c", show]))
            .unwrap()
            .wait();
        let got: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(got, serde_json::json!([[], null, "C.UTF-8", common::PATH]));
        // Ten thousand arguments arrive, in order.
        let many: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            "echo $#; echo $1 ${10000}".into(),
            "sh".into(),
        ];
        argv.extend(many);
        let r = s.spawn(&Command::new(argv)).unwrap().wait();
        assert_eq!(r.stdout, "10000\n0 9999\n", "{who:?}: {r:?}");
        // Arguments past what one start carries are refused, named, and change nothing.
        let huge = vec!["/bin/true".to_string(), "x".repeat(300 * 1024)];
        let e = s.spawn(&Command::new(huge)).expect_err("too large a start");
        assert!(e.to_string().contains("KiB"), "{who:?}: {e}");
        let r = s.spawn(&Command::new(["true"])).unwrap().wait();
        assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
        s.end();
    });
}

#[test]
fn many_starts_at_once_each_get_their_own_streams_and_status() {
    as_both(
        "many_starts_at_once_each_get_their_own_streams_and_status",
        |who| {
            let dir = project();
            let s = start("shell", dir.path());
            // Three rounds of 16 threads starting at once: more starts than the spawner thread
            // has slots, so some wait for an earlier child's exec.
            for round in 0..3 {
                let barrier = std::sync::Barrier::new(16);
                std::thread::scope(|scope| {
                    for i in 0..16 {
                        let (s, barrier) = (&s, &barrier);
                        scope.spawn(move || {
                            barrier.wait();
                            let r = s
                                .spawn(&Command::new([
                                    "/bin/sh",
                                    "-c",
                                    "echo out $0; echo err $0 >&2; exit $(($0 % 7))",
                                    &i.to_string(),
                                ]))
                                .unwrap()
                                .wait();
                            assert_eq!(r.stdout, format!("out {i}\n"), "{who:?} {round}: {r:?}");
                            assert_eq!(r.stderr, format!("err {i}\n"), "{who:?} {round}: {r:?}");
                            assert_eq!(r.exit_code, Some(i % 7), "{who:?} {round}: {r:?}");
                        });
                    }
                });
            }
            s.end();
        },
    );
}

/// Fields of `/proc/PID/stat` after the command name: (parent, process group, session).
fn ids(pid: i32) -> (i32, i32, i32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<i32> = stat[stat.rfind(')').unwrap() + 4..]
        .split(' ')
        .take(3)
        .map(|x| x.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

#[test]
fn a_command_leads_a_group_and_one_on_a_terminal_or_beside_others_its_own_session() {
    as_both(
        "a_command_leads_a_group_and_one_on_a_terminal_or_beside_others_its_own_session",
        |who| {
            let dir = project();
            let s = start("shell", dir.path());
            // Without a terminal: a group of its own in the resident's session (no scheduler
            // autogroup per command), which its children share.
            let plain = s
                .spawn(&Command::new(["/bin/sh", "-c", "sleep 30 & wait"]))
                .unwrap();
            let pid = plain.pid();
            let (resident, group, session) = ids(pid);
            assert_eq!(group, pid, "{who:?}: its own group");
            assert_ne!(session, pid, "{who:?}: not a session of its own");
            assert_eq!(session, ids(resident).2, "{who:?}: the resident's session");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let sleeper = loop {
                if let Some(c) = children(pid).first() {
                    break *c;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{who:?}: no sleep started"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            assert_eq!(ids(sleeper).1, pid, "{who:?}: its child is in its group");
            // A signal to the command reaches its group: the shell and its sleep end.
            plain.signal(libc::SIGTERM).unwrap();
            let r = plain.wait();
            assert_eq!(r.signal, Some(libc::SIGTERM), "{who:?}: {r:?}");
            // (Its end and reap by the session's init come a moment after the shell's.)
            let gone = || {
                std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
                    .map_or(true, |s| s.contains(") Z "))
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !gone() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{who:?}: the group's sleep did not end"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // On a terminal: a session of its own, whose controlling terminal that is.
            let tty = s.spawn(&Command::new(["sleep", "30"]).pty(80, 24)).unwrap();
            let (_, group, session) = ids(tty.pid());
            assert_eq!((group, session), (tty.pid(), tty.pid()), "{who:?}");
            // Started while another command runs: a session of its own too (its own
            // scheduler autogroup), also without a terminal.
            let beside = s.spawn(&Command::new(["sleep", "30"])).unwrap();
            let (_, group, session) = ids(beside.pid());
            assert_eq!((group, session), (beside.pid(), beside.pid()), "{who:?}");
            for p in [tty, beside] {
                p.signal(libc::SIGKILL).unwrap();
                p.wait();
            }
            // Alone again: a group in the resident's session.
            let alone = s.spawn(&Command::new(["sleep", "30"])).unwrap();
            let (_, group, session) = ids(alone.pid());
            assert_eq!(group, alone.pid(), "{who:?}");
            assert_eq!(session, ids(resident).2, "{who:?}");
            alone.signal(libc::SIGKILL).unwrap();
            alone.wait();
            s.end();
        },
    );
}
