//! Sessions (`sandbox_host::session`): one sandbox, many commands, with real programs. Each
//! test runs as root and, re-executing this test binary under `setpriv`, as uid 65534.

mod common;

use common::{as_both, As, SANDBOX};
use sandbox_host::exec::Request;
use sandbox_host::session::{Command, Event, Session, SessionOptions};
use std::time::{Duration, Instant};

/// A project directory of the test's user (made by that user, so uid 65534 owns its own).
fn project() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("session-project")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// The policy of the tests: `profile`, the project as workspace and working directory, the
/// bare environment agents pass.
fn policy(profile: &str, dir: &std::path::Path) -> Request {
    let mut r = Request::builder(["/bin/true"])
        .profile(profile)
        .workspace(dir.to_str().unwrap())
        .cwd(dir.to_str().unwrap())
        .build();
    r.env.insert("PATH".into(), common::PATH.into());
    r.env.insert("LANG".into(), "C.UTF-8".into());
    r
}

/// A session of `profile` in a fresh project; the project lives as long as the session.
struct Held {
    session: Session,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Held {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

fn start(profile: &str) -> Held {
    start_with(profile, |r| r, SessionOptions::new(SANDBOX))
}

fn start_with(profile: &str, edit: impl Fn(Request) -> Request, options: SessionOptions) -> Held {
    let dir = project();
    let session =
        Session::start(&edit(policy(profile, dir.path())), &options).expect("start a session");
    Held { session, _dir: dir }
}

/// The host pids of processes whose command line is exactly `argv`.
fn find(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .filter(|pid| {
            // Zombies are dead already.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit(") ").next().unwrap_or("").starts_with('Z'))
        })
        .collect()
}

/// Waits up to 10 s for `cond`.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Output events until `needle` has appeared in the stream; the text so far.
fn read_until(p: &sandbox_host::session::Process, needle: &str) -> String {
    let mut text = String::new();
    let until = Instant::now() + Duration::from_secs(10);
    while !text.contains(needle) {
        assert!(Instant::now() < until, "no `{needle}` in {text:?}");
        match p.next_event(Duration::from_millis(200)) {
            Some(Event::Stdout(b)) | Some(Event::Stderr(b)) => {
                text.push_str(&String::from_utf8_lossy(&b))
            }
            None => {}
        }
    }
    text
}

fn sh(script: &str) -> Command {
    Command::new(["/bin/bash", "-c", script])
}

#[test]
fn commands_share_background_processes_and_tmp() {
    as_both("commands_share_background_processes_and_tmp", |who| {
        let s = start("shell");
        let r = s
            .spawn(&sh("echo kept > /tmp/note; sleep 100 & echo $!"))
            .unwrap()
            .wait();
        assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
        let pid = r.stdout.trim().to_string();
        let r = s
            .spawn(&sh(&format!("cat /tmp/note; kill -0 {pid} && echo alive")))
            .unwrap()
            .wait();
        assert_eq!(r.stdout, "kept\nalive\n", "{who:?}: {r:?}");
        s.end();
    });
}

/// A unique marker for process names, per test and user.
fn marker(who: As, n: u32) -> String {
    let base = match who {
        As::Root => 4000,
        As::Nobody => 5000,
    };
    format!("{}.{}", base + n, std::process::id() % 1000)
}

#[test]
fn a_server_started_by_one_command_is_fetched_by_the_next() {
    as_both(
        "a_server_started_by_one_command_is_fetched_by_the_next",
        |who| {
            let s = start_with(
                "shell-network",
                |r| {
                    let mut r = r;
                    r.network = Some(sandbox_host::NetworkMode::None);
                    r
                },
                SessionOptions::new(SANDBOX),
            );
            std::fs::write(
                s._dir.path().join("index.html"),
                "served from the session\n",
            )
            .unwrap();
            let r = s
                .spawn(&sh(
                    "/usr/bin/python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &",
                ))
                .unwrap()
                .wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
            let fetch =
                "for i in $(seq 50); do curl -sf http://127.0.0.1:8765/index.html && exit 0; \
                     sleep 0.1; done; exit 1";
            let r = s.spawn(&sh(fetch)).unwrap().wait();
            assert_eq!(
                (r.exit_code, r.stdout.as_str()),
                (Some(0), "served from the session\n"),
                "{who:?}: {r:?}"
            );
            // Control: another session has its own network namespace; the server is not there.
            let other = start_with(
                "shell-network",
                |r| {
                    let mut r = r;
                    r.network = Some(sandbox_host::NetworkMode::None);
                    r
                },
                SessionOptions::new(SANDBOX),
            );
            let r = other
                .spawn(&sh("curl -sf -m 2 http://127.0.0.1:8765/index.html"))
                .unwrap()
                .wait();
            assert_ne!(r.exit_code, Some(0), "{who:?}: {r:?}");
        },
    );
}

#[test]
fn output_streams_while_the_command_runs() {
    as_both("output_streams_while_the_command_runs", |who| {
        let s = start("shell");
        let t = Instant::now();
        let p = s
            .spawn(&sh("echo first; sleep 1; echo second >&2").stream(true))
            .unwrap();
        read_until(&p, "first");
        let first_at = t.elapsed();
        let rest: Vec<Event> = p.events().collect();
        let r = p.wait();
        assert!(
            first_at < Duration::from_millis(900),
            "{who:?}: first at {first_at:?}"
        );
        assert_eq!(rest, vec![Event::Stderr(b"second\n".to_vec())], "{who:?}");
        assert_eq!(
            (r.stdout.as_str(), r.stderr.as_str()),
            ("first\n", "second\n")
        );
    });
}

#[test]
fn python_answers_over_stdin() {
    as_both("python_answers_over_stdin", |who| {
        let s = start("shell");
        let p = s
            .spawn(&Command::new(["/usr/bin/python3", "-i", "-q", "-u"]).stream(true))
            .unwrap();
        p.write_stdin(b"print(6 * 7)\n").unwrap();
        read_until(&p, "42");
        p.write_stdin(b"x = 'again'; print(x)\n").unwrap();
        read_until(&p, "again");
        p.close_stdin();
        let r = p.wait();
        assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
        assert!(r.stdout.contains("42\nagain\n"), "{who:?}: {r:?}");
    });
}

#[test]
fn sigint_ends_sleep_and_make() {
    as_both("sigint_ends_sleep_and_make", |who| {
        let s = start("shell");
        let m = marker(who, 1);
        let p = s.spawn(&Command::new(["sleep", &m])).unwrap();
        eventually("sleep runs", || !find(&["sleep", &m]).is_empty());
        p.signal(libc::SIGINT).unwrap();
        let r = p.wait();
        assert_eq!(r.signal, Some(libc::SIGINT), "{who:?}: {r:?}");
        // make runs sleep in a shell; SIGINT reaches the whole group, as at a terminal.
        let m = marker(who, 2);
        std::fs::write(
            s._dir.path().join("Makefile"),
            format!("all:\n\tsleep {m}\n"),
        )
        .unwrap();
        let p = s.spawn(&Command::new(["make"])).unwrap();
        eventually("make's sleep runs", || !find(&["sleep", &m]).is_empty());
        let t = Instant::now();
        p.signal(libc::SIGINT).unwrap();
        let r = p.wait();
        assert!(t.elapsed() < Duration::from_secs(5), "{who:?}: {r:?}");
        assert!(
            r.signal == Some(libc::SIGINT) || r.exit_code == Some(2),
            "{who:?}: {r:?}"
        );
        eventually("make's sleep is gone", || find(&["sleep", &m]).is_empty());
        // Control: without the signal the same command is still running.
        let m = marker(who, 3);
        let p = s
            .spawn(&Command::new(["sleep", &m]).timeout(Duration::from_secs(2)))
            .unwrap();
        eventually("sleep runs", || !find(&["sleep", &m]).is_empty());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(find(&["sleep", &m]).len(), 1, "{who:?}");
        let r = p.wait();
        assert!(r.timed_out && r.limits_hit == ["time"], "{who:?}: {r:?}");
        assert!(r.signal.is_some(), "{who:?}: {r:?}");
        // Out-of-range signals are refused.
        let p = s.spawn(&Command::new(["true"])).unwrap();
        assert!(p.signal(0).is_err() && p.signal(65).is_err() && p.signal(-9).is_err());
        p.wait();
    });
}

#[test]
fn two_sessions_cannot_see_each_others_processes_or_files() {
    as_both(
        "two_sessions_cannot_see_each_others_processes_or_files",
        |who| {
            let a = start("shell");
            let b = start("shell");
            let m = marker(who, 4);
            let r = a
                .spawn(&sh(&format!(
                    "echo a > /tmp/from-a; sleep {m} >/dev/null 2>&1 &"
                )))
                .unwrap()
                .wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
            // Every process's command line, one a line: the script's own holds the marker too, but
            // not as a whole line.
            let look = format!(
                "ls /tmp; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done \
             | grep -x 'sleep {m} '; true"
            );
            // Control: a command of the same session sees both.
            let r = a.spawn(&sh(&look)).unwrap().wait();
            assert!(
                r.stdout.contains("from-a") && r.stdout.contains(&m),
                "{who:?}: {r:?}"
            );
            let r = b.spawn(&sh(&look)).unwrap().wait();
            assert!(
                !r.stdout.contains("from-a") && !r.stdout.contains(&m),
                "{who:?}: {r:?}"
            );
            // Nor can it signal it: the pid of A's sleep names nothing of A in B. Control: in
            // A the same pid reaches it.
            let pid = a.spawn(&sh("pgrep -x sleep")).unwrap().wait().stdout;
            let pid = pid.trim();
            let r = a.spawn(&sh(&format!("kill -0 {pid}"))).unwrap().wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
            b.spawn(&sh(&format!("kill -9 {pid}"))).unwrap().wait();
            assert_eq!(find(&["sleep", &m]).len(), 1, "{who:?}");
        },
    );
}

#[test]
fn ending_a_session_kills_everything_in_it() {
    as_both("ending_a_session_kills_everything_in_it", |who| {
        let s = start("shell");
        let m = marker(who, 5);
        let r = s
            .spawn(&sh(&format!("sleep {m} >/dev/null 2>&1 &")))
            .unwrap()
            .wait();
        assert_eq!(r.exit_code, Some(0));
        let running = s.spawn(&Command::new(["sleep", "300"])).unwrap();
        // Control: the background process outlived the command that started it (the shell may
        // end before its child has exec'd `sleep`).
        eventually("the background sleep runs", || {
            find(&["sleep", &m]).len() == 1
        });
        s.end();
        assert!(find(&["sleep", &m]).is_empty(), "{who:?}");
        let r = running.wait();
        assert!(
            r.cancelled && r.signal == Some(libc::SIGKILL),
            "{who:?}: {r:?}"
        );
        let e = s.spawn(&Command::new(["true"])).unwrap_err();
        assert_eq!(e.field(), "session", "{who:?}");
    });
}

#[test]
fn an_idle_session_ends_on_time() {
    as_both("an_idle_session_ends_on_time", |who| {
        let mut o = SessionOptions::new(SANDBOX);
        o.idle_timeout = Some(Duration::from_millis(800));
        let s = start_with("shell", |r| r, o);
        let m = marker(who, 6);
        s.spawn(&sh(&format!("sleep {m} >/dev/null 2>&1 &")))
            .unwrap()
            .wait();
        // A running command is not idleness.
        let r = s.spawn(&Command::new(["sleep", "1.2"])).unwrap().wait();
        assert_eq!(r.exit_code, Some(0), "{who:?}: {r:?}");
        assert!(!s.is_ended() && find(&["sleep", &m]).len() == 1, "{who:?}");
        let t = Instant::now();
        eventually("the idle session ends", || s.is_ended());
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{who:?}: {:?}",
            t.elapsed()
        );
        eventually("its processes are gone", || find(&["sleep", &m]).is_empty());
    });
}

#[test]
fn violations_are_the_commands_that_made_them() {
    as_both("violations_are_the_commands_that_made_them", |who| {
        let s = start("shell");
        let connect = "import socket; socket.socket(socket.AF_INET).connect(('127.0.0.1', 9))";
        let p = s
            .spawn(&Command::new(["/usr/bin/python3", "-c", connect]))
            .unwrap();
        let quiet = s.spawn(&Command::new(["sleep", "0.3"])).unwrap();
        let r = p.wait();
        assert_ne!(r.exit_code, Some(0), "{who:?}: {r:?}");
        assert_eq!(r.violations.len(), 1, "{who:?}: {r:?}");
        assert_eq!(r.violations[0].syscall, "socket", "{who:?}: {r:?}");
        let q = quiet.wait();
        assert!(
            q.violations.is_empty() && q.exit_code == Some(0),
            "{who:?}: {q:?}"
        );
        // Control: a profile that allows it runs the same command without a refusal.
        let n = start("shell-network");
        let r = n
            .spawn(&Command::new([
                "/usr/bin/python3",
                "-c",
                "import socket; socket.socket(socket.AF_INET)",
            ]))
            .unwrap()
            .wait();
        assert!(
            r.violations.is_empty() && r.exit_code == Some(0),
            "{who:?}: {r:?}"
        );
    });
}

/// Many short commands in a row each get their exact status, read however the session learns
/// it (from the pidfd after the kernel's reap, where the kernel keeps it; from the resident
/// elsewhere): a status read while the kernel releases the process must wait for the reap, not
/// be taken for a kill. Control: `false` among them exits 1, so the statuses are not constant.
#[test]
fn short_commands_in_a_row_each_get_their_status() {
    as_both("short_commands_in_a_row_each_get_their_status", |who| {
        let s = start("minimal");
        for i in 0..300 {
            let (argv, want) = if i % 10 == 9 {
                ("/bin/false", 1)
            } else {
                ("/bin/true", 0)
            };
            let r = s.spawn(&Command::new([argv])).unwrap().wait();
            assert_eq!(r.exit_code, Some(want), "{who:?} command {i}: {r:?}");
        }
    });
}

/// A command nobody waits for is supervised all the same (the session's watch gives it a
/// thread once it has gone unwaited for a moment): its timeout ends it, its refused call is
/// answered, its output is read past a pipe's worth. Controls: the same `sleep` without a
/// timeout is still alive after the other has been ended; the refused call is reported when
/// the command is finally waited for.
#[test]
fn a_command_nobody_waits_for_is_still_supervised() {
    as_both("a_command_nobody_waits_for_is_still_supervised", |who| {
        let s = start("shell");
        let (timed, free) = (marker(who, 8), marker(who, 9));
        let limited = s
            .spawn(&Command::new(["sleep", &timed]).timeout(Duration::from_secs(1)))
            .unwrap();
        let unlimited = s.spawn(&Command::new(["sleep", &free])).unwrap();
        let answered = s._dir.path().join("answered");
        let written = s._dir.path().join("written");
        let refused = s
            .spawn(&sh(&format!(
                "python3 -c \"import socket; socket.socket(socket.AF_INET)\" 2>/dev/null; \
                 echo >{}",
                answered.display()
            )))
            .unwrap();
        let loud = s
            .spawn(&sh(&format!(
                "head -c 1048576 /dev/zero; echo >{}",
                written.display()
            )))
            .unwrap();
        eventually("the refused call is answered", || answered.exists());
        eventually("the output is read", || written.exists());
        eventually("the timeout ends the command", || {
            find(&["sleep", &timed]).is_empty()
        });
        assert_eq!(find(&["sleep", &free]).len(), 1, "{who:?}");
        let r = limited.wait();
        assert!(r.timed_out, "{who:?}: {r:?}");
        let r = refused.wait();
        assert_eq!(r.violations.len(), 1, "{who:?}: {r:?}");
        assert_eq!(r.violations[0].syscall, "socket", "{who:?}: {r:?}");
        let r = loud.wait();
        assert!(r.stdout_truncated || r.stdout.len() == 1 << 20, "{who:?}");
        unlimited.signal(libc::SIGKILL).unwrap();
        assert_eq!(unlimited.wait().signal, Some(libc::SIGKILL), "{who:?}");
    });
}

#[test]
fn concurrent_starts_each_get_their_own_output_and_violations() {
    as_both(
        "concurrent_starts_each_get_their_own_output_and_violations",
        |who| {
            let s = start("shell");
            let connect = "import socket; socket.socket(socket.AF_INET).connect(('127.0.0.1', 9))";
            // Two threads start commands at once: one echoes its own marker to stdout and
            // stderr, the other alternates a refused `socket` with a quiet command.
            std::thread::scope(|scope| {
                let echoes = scope.spawn(|| {
                    for i in 0..30 {
                        let m = format!("echo-{i}");
                        let r = s
                            .spawn(&sh(&format!("echo {m}; echo {m} >&2; exit {}", i % 7)))
                            .unwrap()
                            .wait();
                        assert_eq!(r.stdout, format!("{m}\n"), "{who:?}: {r:?}");
                        assert_eq!(r.stderr, format!("{m}\n"), "{who:?}: {r:?}");
                        assert_eq!(r.exit_code, Some(i % 7), "{who:?}: {r:?}");
                        assert!(r.violations.is_empty(), "{who:?}: {r:?}");
                    }
                });
                for i in 0..10 {
                    let r = s
                        .spawn(&Command::new(["/usr/bin/python3", "-c", connect]))
                        .unwrap()
                        .wait();
                    assert_ne!(r.exit_code, Some(0), "{who:?} {i}: {r:?}");
                    assert_eq!(r.violations.len(), 1, "{who:?} {i}: {r:?}");
                    assert_eq!(r.violations[0].syscall, "socket", "{who:?}: {r:?}");
                    let q = s.spawn(&Command::new(["true"])).unwrap().wait();
                    assert!(
                        q.violations.is_empty() && q.exit_code == Some(0),
                        "{who:?} {i}: {q:?}"
                    );
                }
                echoes.join().unwrap();
            });
            // Control: the same script in a profile that allows sockets has no refusal, so the
            // counts above come from the filter, not from the script failing otherwise.
            let n = start("shell-network");
            let r = n
                .spawn(&Command::new([
                    "/usr/bin/python3",
                    "-c",
                    "import socket; socket.socket(socket.AF_INET)",
                ]))
                .unwrap()
                .wait();
            assert!(
                r.violations.is_empty() && r.exit_code == Some(0),
                "{who:?}: {r:?}"
            );
        },
    );
}

#[test]
fn a_command_inherits_only_its_three_streams() {
    as_both("a_command_inherits_only_its_three_streams", |who| {
        let s = start("shell");
        // The resident starts commands sharing its descriptor table until their exec: none of
        // its own descriptors (control socket, signalfd, listeners, saved streams) may stay.
        let list = "ls /proc/self/fd | sort -n | tr '\\n' ' '";
        for _ in 0..3 {
            let r = s.spawn(&sh(list)).unwrap().wait();
            // 3 is the directory `ls` reads.
            assert_eq!(r.stdout, "0 1 2 3 ", "{who:?}: {r:?}");
        }
        // Nor the `cgroup.procs` of a command's own cgroups, by which its first process joined
        // them (as root here; uid 65534 has no cgroup and its memory limit is watched).
        let r = s
            .spawn(
                &sh(list)
                    .memory(128 << 20)
                    .processes(64)
                    .timeout(Duration::from_secs(30)),
            )
            .map(|p| p.wait());
        match r {
            Ok(r) => assert_eq!(r.stdout, "0 1 2 3 ", "{who:?}: {r:?}"),
            Err(e) => assert!(who == As::Nobody && e.field() == "limits.processes", "{e}"),
        }
        // Control: a descriptor the command does hold shows in the same listing.
        let r = s
            .spawn(&sh(&format!("exec 7</dev/null; {list}")))
            .unwrap()
            .wait();
        assert_eq!(r.stdout, "0 1 2 3 7 ", "{who:?}: {r:?}");
    });
}

#[test]
fn a_command_cannot_widen_its_sessions_policy_or_reach_the_host() {
    as_both(
        "a_command_cannot_widen_its_sessions_policy_or_reach_the_host",
        |who| {
            let s = start("shell");
            // Only the standard streams: no descriptor of the resident or the host.
            let r = s.spawn(&sh("ls /proc/self/fd")).unwrap().wait();
            assert_eq!(r.stdout, "0\n1\n2\n3\n", "{who:?}: {r:?}");
            // The filter is the command's: re-exec without the preload changes nothing, and a
            // write outside the workspace is refused as in a one-shot run.
            let r = s.spawn(&sh("touch /etc/session-escape")).unwrap().wait();
            assert_ne!(r.exit_code, Some(0), "{who:?}: {r:?}");
            assert!(!std::path::Path::new("/etc/session-escape").exists());
            let r = s
                .spawn(&sh("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status"))
                .unwrap()
                .wait();
            assert!(
                r.stdout.contains("Seccomp:\t2") && r.stdout.contains("NoNewPrivs:\t1"),
                "{who:?}: {r:?}"
            );
            // The resident's memory is not readable (the path buffer's address is there).
            let r = s
                .spawn(&sh(
                    "cat /proc/1/mem /proc/$PPID/mem 2>&1; cat /proc/$PPID/environ",
                ))
                .unwrap()
                .wait();
            assert!(!r.stdout.contains("PATH="), "{who:?}: {r:?}");
            // Control: the command's own environment is readable the same way.
            let r = s
                .spawn(&sh("cat /proc/self/environ | tr '\\0' '\\n'"))
                .unwrap()
                .wait();
            assert!(r.stdout.contains("PATH="), "{who:?}: {r:?}");
        },
    );
}

#[test]
fn hostile_commands_are_refused_and_change_nothing() {
    as_both("hostile_commands_are_refused_and_change_nothing", |who| {
        let s = start("shell");
        let cases: Vec<(Command, &str)> = vec![
            (Command::new(Vec::<String>::new()), "argv"),
            (Command::new([""]), "argv"),
            (Command::new(["/bin/echo", "a\0b"]), "argv"),
            (Command::new(["./relative"]), "argv[0]"),
            (
                Command::new(["true"]).env("LD_PRELOAD", "/x.so"),
                "env.LD_PRELOAD",
            ),
            (Command::new(["true"]).env("A", "b\0c"), "env.A"),
            (Command::new(["true"]).cwd("relative"), "cwd"),
            (Command::new(["true"]).cwd("/nonexistent-dir"), "cwd"),
            (
                Command::new(["true"]).timeout(Duration::from_secs(100_000)),
                "timeout_s",
            ),
        ];
        for (c, field) in cases {
            let e = s.spawn(&c).expect_err(field);
            assert!(
                e.field().starts_with(field.split('.').next().unwrap()),
                "{who:?}: {field}: {e:?}"
            );
        }
        let e = s
            .spawn(&Command::new(["/nonexistent-program"]))
            .unwrap_err();
        assert_eq!(e.exit_code(), Some(127), "{who:?}: {e:?}");
        // The session still serves.
        let r = s.spawn(&Command::new(["echo", "ok"])).unwrap().wait();
        assert_eq!(r.stdout, "ok\n", "{who:?}");
    });
}

/// Set in the re-executed test binary that holds a session until it is killed.
const HOLDER: &str = "SESSION_TEST_HOLDER";

/// Not a test of its own: the host process of `a_session_dies_with_its_host`, which holds a
/// session with a background and a running command (and, for the control, a process it
/// started without a sandbox), says `ready` and waits to be killed.
#[test]
fn holder() {
    let Ok(m) = std::env::var(HOLDER) else { return };
    let s = start("shell");
    s.spawn(&sh(&format!("sleep {m}1 >/dev/null 2>&1 &")))
        .unwrap()
        .wait();
    let _running = s.spawn(&Command::new(["sleep", &format!("{m}2")])).unwrap();
    // Left running on purpose: the control that outlives the host.
    std::process::Command::new("setsid")
        .args(["-f", "sleep", &format!("{m}3")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    eventually("the commands run", || {
        !find(&["sleep", &format!("{m}2")]).is_empty()
    });
    println!("ready");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_session_dies_with_its_host() {
    as_both("a_session_dies_with_its_host", |who| {
        use std::io::BufRead;
        let m = marker(who, 7);
        let mut host = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "holder", "--nocapture", "--test-threads=1"])
            .env(HOLDER, &m)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(host.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.is_ok_and(|l| l.contains("ready"))),
            "{who:?}: the holder did not start its session"
        );
        for n in 1..=3 {
            eventually("the holder's processes run", || {
                find(&["sleep", &format!("{m}{n}")]).len() == 1
            });
        }
        host.kill().unwrap();
        host.wait().unwrap();
        eventually("the session's processes die with the host", || {
            find(&["sleep", &format!("{m}1")]).is_empty()
                && find(&["sleep", &format!("{m}2")]).is_empty()
        });
        // Control: what the host started outside a sandbox outlives it.
        std::thread::sleep(Duration::from_millis(200));
        let survivor = find(&["sleep", &format!("{m}3")]);
        assert_eq!(survivor.len(), 1, "{who:?}");
        // SAFETY: kill with a positive pid of our own stray process.
        unsafe { libc::kill(survivor[0], libc::SIGKILL) };
    });
}

/// `sandbox serve` on stdin, as `who`, with lines read on a thread of their own.
struct Served {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl Served {
    fn start(who: As) -> Served {
        use std::io::BufRead;
        // The uid 65534 half of a test runs as that user already: no setpriv again.
        let mut cmd = common::sandbox(As::Root);
        if who == As::Nobody {
            cmd.env("HOME", "/nonexistent");
        }
        let mut child = cmd
            .arg("serve")
            .current_dir("/")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&l).expect("a JSON line"));
            }
        });
        Served {
            input: child.stdin.take(),
            child,
            lines: rx,
        }
    }

    fn send(&mut self, v: serde_json::Value) {
        use std::io::Write;
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{v}").unwrap();
        input.flush().unwrap();
    }

    /// The next line with this `id` (others are skipped).
    fn next(&self, id: &str) -> serde_json::Value {
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("a line from the server");
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The error of the next line with this `id`: its field.
    fn error(&self, id: &str) -> String {
        let v = self.next(id);
        v["error"]["field"]
            .as_str()
            .unwrap_or_else(|| panic!("an error line: {v}"))
            .to_string()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.input.take();
        let _ = self.child.wait();
    }
}

#[test]
fn serve_runs_sessions_over_json_lines() {
    as_both("serve_runs_sessions_over_json_lines", |who| {
        use serde_json::json;
        let dir = project();
        let ws = dir.path().to_str().unwrap();
        let mut s = Served::start(who);
        s.send(json!({"op": "session_start", "id": "s", "profile": "shell",
                      "workspace": ws, "cwd": ws, "env": {"PATH": common::PATH}}));
        let v = s.next("s");
        let session = v["session"]
            .as_str()
            .unwrap_or_else(|| panic!("{who:?}: {v}"))
            .to_string();
        // A background process of one command serves the next.
        s.send(json!({"op": "start", "id": "bg", "session": session,
                      "argv": ["bash", "-c", "echo state > /tmp/kept; sleep 100 >/dev/null 2>&1 &"]}));
        assert_eq!(s.next("bg")["exit_code"], 0, "{who:?}");
        s.send(json!({"op": "start", "id": "see", "session": session,
                      "argv": ["bash", "-c", "cat /tmp/kept; pgrep -x sleep >/dev/null && echo alive"]}));
        assert_eq!(s.next("see")["stdout"], "state\nalive\n", "{who:?}");
        // Python answered over stdin, its output streamed as events.
        s.send(
            json!({"op": "start", "id": "py", "session": session, "stream": true,
                      "argv": ["/usr/bin/python3", "-i", "-q", "-u"]}),
        );
        s.send(json!({"op": "stdin", "id": "py", "data": "print(6 * 7)\n"}));
        let mut seen = String::new();
        while !seen.contains("42") {
            let v = s.next("py");
            assert!(
                v["event"].is_string(),
                "{who:?}: an event before the result: {v}"
            );
            seen.push_str(v["data"].as_str().unwrap());
        }
        s.send(json!({"op": "stdin", "id": "py", "eof": true}));
        let r = loop {
            let v = s.next("py");
            if v.get("event").is_none() {
                break v;
            }
        };
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        // NUL in stdin data is a byte like any other.
        s.send(json!({"op": "start", "id": "od", "session": session, "argv": ["od", "-An", "-c"]}));
        s.send(json!({"op": "stdin", "id": "od", "data": "a\u{0}b", "eof": true}));
        assert!(
            s.next("od")["stdout"]
                .as_str()
                .unwrap()
                .contains("a  \\0   b"),
            "{who:?}"
        );
        // A terminal of a given size, resized while the command waits; the size it reads
        // after is the new one. Control: the same command without `tty` has no terminal.
        s.send(json!({"op": "start", "id": "tt", "session": session,
                      "tty": {"cols": 100, "rows": 40},
                      "argv": ["bash", "-c", "stty size; read x; stty size"]}));
        std::thread::sleep(Duration::from_millis(300));
        s.send(json!({"op": "resize", "id": "tt", "cols": 120, "rows": 50}));
        s.send(json!({"op": "stdin", "id": "tt", "data": "go\n"}));
        let out = s.next("tt")["stdout"].as_str().unwrap().to_string();
        assert!(
            out.contains("40 100") && out.contains("50 120"),
            "{who:?}: {out:?}"
        );
        s.send(json!({"op": "start", "id": "nt", "session": session, "argv": ["stty", "size"]}));
        assert_ne!(
            s.next("nt")["exit_code"],
            0,
            "{who:?}: stty without a terminal"
        );
        for bad in [
            json!({"cols": 0, "rows": 5}),
            json!({"cols": 5}),
            json!({"cols": 5, "rows": 70000}),
            json!({"cols": "80", "rows": 5}),
            json!({"cols": 5, "rows": 5, "x": 1}),
            json!(true),
        ] {
            s.send(json!({"op": "start", "id": "tb", "session": session, "tty": bad, "argv": ["true"]}));
            assert_eq!(s.error("tb"), "tty", "{who:?}");
        }
        s.send(json!({"op": "resize", "id": "nobody-runs-this", "cols": 80, "rows": 24}));
        assert_eq!(s.error("nobody-runs-this"), "id", "{who:?}");
        // SIGINT by name.
        s.send(json!({"op": "start", "id": "sl", "session": session, "argv": ["sleep", "100"]}));
        std::thread::sleep(Duration::from_millis(300));
        s.send(json!({"op": "signal", "id": "sl", "signal": "SIGFOO"}));
        assert_eq!(s.error("sl"), "signal", "{who:?}");
        s.send(json!({"op": "signal", "id": "sl", "signal": "int"}));
        assert_eq!(s.next("sl")["signal"], libc::SIGINT, "{who:?}");
        // Hostile lines: each refused, naming its field; nothing else changes.
        let cases = [
            (
                json!({"op": "start", "id": "h1", "session": "s999", "argv": ["true"]}),
                "session",
            ),
            (
                json!({"op": "start", "id": "h2", "session": session, "argv": ["a\u{0}b"]}),
                "argv",
            ),
            (
                json!({"op": "start", "id": "h3", "session": session, "argv": ["true"], "timeout_s": 1e300}),
                "timeout_s",
            ),
            (
                json!({"op": "start", "id": "h4", "session": session, "argv": ["true"], "bogus": 1}),
                "start",
            ),
            (
                json!({"op": "start", "id": "h5", "session": session, "argv": ["true"], "env": {"LD_PRELOAD": "/x"}}),
                "env",
            ),
            (
                json!({"op": "signal", "id": "nobody-runs-this", "signal": "SIGINT"}),
                "id",
            ),
            (
                json!({"op": "stdin", "id": "nobody-runs-this", "data": "x"}),
                "id",
            ),
            (json!({"op": "launch", "id": "h6"}), "op"),
            (
                json!({"op": "session_start", "id": "h7", "argv": ["true"]}),
                "argv",
            ),
            (
                json!({"op": "session_start", "id": "h8", "profile": "nope"}),
                "profile",
            ),
            (
                json!({"op": "session_start", "id": "h9", "idle_s": 1e12}),
                "idle_s",
            ),
        ];
        for (line, field) in cases {
            let id = line["id"].as_str().unwrap().to_string();
            s.send(line);
            assert_eq!(s.error(&id), field, "{who:?}: {id}");
        }
        s.send(json!({"op": "session_end", "id": "end", "session": session}));
        assert_eq!(s.next("end")["ended"], session.as_str(), "{who:?}");
        s.send(json!({"op": "start", "id": "late", "session": session, "argv": ["true"]}));
        assert_eq!(s.error("late"), "session", "{who:?}");
        // Exec requests still work on the same stream.
        s.send(json!({"id": "one-shot", "argv": ["/bin/echo", "plain"]}));
        assert_eq!(s.next("one-shot")["stdout"], "plain\n", "{who:?}");
    });
}

/// `start`'s `limits` object over `serve`: a command's own memory limit ends it and is named
/// in its result while the session lives (control: the same allocation without the limit
/// succeeds); hostile values are refused, each naming its field, and change nothing.
#[test]
fn serve_takes_a_commands_own_limits() {
    as_both("serve_takes_a_commands_own_limits", |who| {
        use serde_json::json;
        let dir = project();
        let ws = dir.path().to_str().unwrap();
        let mut s = Served::start(who);
        s.send(json!({"op": "session_start", "id": "s", "profile": "shell",
                      "workspace": ws, "cwd": ws, "env": {"PATH": common::PATH}}));
        let v = s.next("s");
        let session = v["session"]
            .as_str()
            .unwrap_or_else(|| panic!("{v}"))
            .to_string();
        let alloc = [
            "/usr/bin/python3",
            "-c",
            "b = b'x' * (200 << 20); print('done')",
        ];
        s.send(
            json!({"op": "start", "id": "big", "session": session, "argv": alloc,
                      "limits": {"memory_bytes": 96u64 << 20}}),
        );
        let v = s.next("big");
        assert_eq!(v["limits_hit"], json!(["memory"]), "{who:?}: {v}");
        assert_eq!(v["signal"], 9, "{who:?}: {v}");
        s.send(json!({"op": "start", "id": "ok", "session": session, "argv": alloc}));
        let v = s.next("ok");
        assert_eq!(v["stdout"], "done\n", "{who:?}: {v}");
        assert_eq!(v["limits_hit"], json!([]), "{who:?}: {v}");
        for (limits, field) in [
            (json!({"memory_bytes": "big"}), "limits.memory_bytes"),
            (json!({"memory_bytes": -1}), "limits.memory_bytes"),
            (json!({"memory_bytes": 1u64 << 40}), "limits.memory_bytes"),
            (json!({"memory_bytes": 0}), "limits.memory_bytes"),
            (json!({"processes": 1.5}), "limits.processes"),
            (json!({"processes": 0}), "limits.processes"),
            (json!({"cpu_seconds": 1}), "limits"),
            (json!({"": 1}), "limits"),
            (json!("512"), "limits"),
            (json!(null), "limits"),
        ] {
            s.send(json!({"op": "start", "id": "bad", "session": session,
                          "argv": ["/bin/true"], "limits": limits}));
            assert_eq!(s.error("bad"), field, "{who:?}: {limits}");
        }
        s.send(json!({"op": "start", "id": "after", "session": session,
                      "argv": ["/bin/echo", "after"]}));
        assert_eq!(s.next("after")["stdout"], "after\n", "{who:?}");
    });
}

/// `serve` on stdin: EOF waits for a session's running command as for a request (it was
/// killed at once, `cancelled`, and now and then the server never exited), and SIGTERM ends
/// the session's commands and the server (it went on while a session lived). Controls: the
/// same command as a one-shot request, under the same EOF and the same signal.
#[test]
fn serve_at_eof_waits_for_session_commands_and_sigterm_ends_them() {
    as_both(
        "serve_at_eof_waits_for_session_commands_and_sigterm_ends_them",
        |who| {
            use serde_json::json;
            let dir = project();
            let ws = dir.path().to_str().unwrap();
            let session = json!({"op": "session_start", "id": "s", "profile": "shell",
                                 "workspace": ws, "cwd": ws, "env": {"PATH": common::PATH}});
            let late = ["sh", "-c", "sleep 0.5; echo done"];
            for round in 0..5 {
                let mut s = Served::start(who);
                s.send(session.clone());
                let name = s.next("s")["session"].as_str().unwrap().to_string();
                s.send(json!({"op": "start", "id": "c", "session": name, "argv": late}));
                s.input.take();
                let r = s.next("c");
                assert_eq!(r["stdout"], "done\n", "{who:?} round {round}: {r}");
                assert_eq!(r["cancelled"], false, "{who:?} round {round}: {r}");
                let deadline = Instant::now() + Duration::from_secs(10);
                while s.child.try_wait().unwrap().is_none() {
                    assert!(
                        Instant::now() < deadline,
                        "{who:?}: serve did not exit at EOF"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            // Control: a one-shot request under the same EOF.
            let mut s = Served::start(who);
            s.send(
                json!({"id": "r", "argv": late, "profile": "shell", "workspace": ws,
                          "cwd": ws, "env": {"PATH": common::PATH}}),
            );
            s.input.take();
            assert_eq!(s.next("r")["stdout"], "done\n", "{who:?}");
            // SIGTERM with a session command running: answered `cancelled`, and the server
            // and the command are gone; control: the same for a one-shot request.
            for (what, setup) in [("session", true), ("request", false)] {
                let mut s = Served::start(who);
                let marker = format!("{}", 400 + std::process::id() % 100);
                let argv = json!(["sleep", marker]);
                if setup {
                    s.send(session.clone());
                    let name = s.next("s")["session"].as_str().unwrap().to_string();
                    s.send(json!({"op": "start", "id": "c", "session": name, "argv": argv}));
                } else {
                    s.send(json!({"id": "c", "argv": argv, "profile": "shell",
                                  "workspace": ws, "cwd": ws, "env": {"PATH": common::PATH}}));
                }
                eventually("the command runs", || !find(&["sleep", &marker]).is_empty());
                // SAFETY: kill of the server this test started.
                unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
                let r = s.next("c");
                assert_eq!(r["cancelled"], true, "{who:?} {what}: {r}");
                let deadline = Instant::now() + Duration::from_secs(10);
                while s.child.try_wait().unwrap().is_none() {
                    assert!(Instant::now() < deadline, "{who:?} {what}: serve went on");
                    std::thread::sleep(Duration::from_millis(20));
                }
                eventually("the command is gone", || {
                    find(&["sleep", &marker]).is_empty()
                });
            }
        },
    );
}
