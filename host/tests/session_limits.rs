//! A session command's own limits and refusals (`Command::memory`, `Command::processes`, the
//! `refusals` of its result), with real programs, as root and, re-executing this test binary
//! under `setpriv`, as uid 65534.

mod common;

use common::{as_both, As, SANDBOX};
use sandbox_host::exec::{ExecResult, Request};
use sandbox_host::session::{Command, Session, SessionOptions};

const MIB: u64 = 1024 * 1024;

/// A directory of the test's user in /var/tmp (uid 65534 owns its own).
fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// A `shell` session of the bare environment agents pass, on `dir`; `edit` changes its policy.
fn session(dir: &std::path::Path, edit: impl Fn(Request) -> Request) -> Session {
    let mut r = Request::builder(["/bin/true"])
        .profile("shell")
        .workspace(dir.to_str().unwrap())
        .cwd(dir.to_str().unwrap())
        .build();
    r.env.insert("PATH".into(), common::PATH.into());
    r.env.insert("LANG".into(), "C.UTF-8".into());
    Session::start(&edit(r), &SessionOptions::new(SANDBOX)).expect("start a session")
}

/// Python touching `mib` MiB of fresh memory, then saying `done`.
fn allocate(mib: u64) -> Command {
    Command::new([
        "/usr/bin/python3",
        "-c",
        &format!("b = b'x' * ({mib} << 20); print('done')"),
    ])
}

fn has_cgroups(who: As) -> bool {
    // This machine's memory and pids hierarchies (v1 or v2) are root's: uid 65534 has none,
    // and its sessions hold a command's memory by the host's watchdog.
    who == As::Root
}

/// The memory cgroups of commands (`cmd-N`) below this host's request cgroups (the other tests
/// of this binary, which may run meanwhile, make none).
fn own_cgroups() -> Vec<String> {
    let prefix = format!("sandbox-exec-{}-", std::process::id());
    let mut found = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = vec!["/sys/fs/cgroup".into()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let p = e.path();
            let memory = p.join("memory.max").exists() || p.join("memory.limit_in_bytes").exists();
            if name.starts_with("cmd-") && memory && p.to_string_lossy().contains(&prefix) {
                found.push(p.display().to_string());
            }
            if p.components().count() < 9 {
                dirs.push(p);
            }
        }
    }
    found
}

fn show(r: &ExecResult) -> String {
    format!(
        "exit {:?} signal {:?} limits {:?}\nstdout {}\nstderr {}\nwarnings {:#?}",
        r.exit_code, r.signal, r.limits_hit, r.stdout, r.stderr, r.warnings
    )
}

#[test]
fn a_command_past_its_own_memory_is_killed_while_the_session_and_its_others_live() {
    as_both(
        "a_command_past_its_own_memory_is_killed_while_the_session_and_its_others_live",
        |who| {
            let dir = tempdir("session-limits");
            let s = session(dir.path(), |r| r);
            // Another command running through the kill.
            let other = s
                .spawn(&Command::new([
                    "/bin/bash",
                    "-c",
                    "sleep 2; echo still here",
                ]))
                .unwrap();
            let big = s.spawn(&allocate(200).memory(96 * MIB)).unwrap();
            if has_cgroups(who) {
                // Its own cgroup exists while it runs, below the session's.
                let dirs = own_cgroups();
                assert!(!dirs.is_empty(), "{who:?}: no command cgroup");
            }
            let big = big.wait();
            assert_eq!(big.signal, Some(libc::SIGKILL), "{who:?}: {}", show(&big));
            assert_eq!(big.limits_hit, ["memory"], "{who:?}: {}", show(&big));
            assert!(
                big.warnings
                    .iter()
                    .any(|w| w.starts_with("sandbox: limit hit: memory: ")
                        && w.contains("the command's limits.memory_bytes")),
                "{who:?}: {}",
                show(&big)
            );
            assert!(!big.stdout.contains("done"), "{who:?}: {}", show(&big));
            // By the out-of-memory killer of the command's own cgroup, or, without one, by
            // the host's watchdog.
            let by = if has_cgroups(who) {
                "the out-of-memory killer ended"
            } else {
                "past the limit of 100663296 bytes"
            };
            assert!(
                big.warnings.iter().any(|w| w.contains(by)),
                "{who:?}: {}",
                show(&big)
            );
            let other = other.wait();
            assert_eq!(other.exit_code, Some(0), "{who:?}: {}", show(&other));
            assert_eq!(other.stdout, "still here\n");
            assert!(other.limits_hit.is_empty(), "{who:?}: {}", show(&other));
            assert!(!s.is_ended(), "{who:?}");
            // Control: the same allocation under a larger limit of its own succeeds.
            let ok = s.spawn(&allocate(200).memory(400 * MIB)).unwrap().wait();
            assert_eq!(ok.exit_code, Some(0), "{who:?}: {}", show(&ok));
            assert_eq!(ok.stdout, "done\n");
            assert!(ok.limits_hit.is_empty(), "{who:?}: {}", show(&ok));
            assert!(ok.warnings.is_empty(), "{who:?}: {}", show(&ok));
            // And without one: the session's limit holds it, and it fits.
            let plain = s.spawn(&allocate(200)).unwrap().wait();
            assert_eq!(plain.exit_code, Some(0), "{who:?}: {}", show(&plain));
            // Each command's cgroup went with it.
            assert_eq!(own_cgroups(), Vec::<String>::new(), "{who:?}");
            s.end();
        },
    );
}

/// Whether a process whose command line contains `mark` runs in session `s` (`pgrep`, run as
/// a command of the session: it sees the session's PID namespace).
fn running(s: &Session, mark: &str) -> bool {
    let r = s
        .spawn(&Command::new(["/usr/bin/pgrep", "-f", mark]))
        .unwrap()
        .wait();
    assert!(
        matches!(r.exit_code, Some(0) | Some(1)),
        "pgrep: {}",
        show(&r)
    );
    r.exit_code == Some(0)
}

#[test]
fn a_command_past_its_own_memory_leaves_none_of_its_processes_running() {
    as_both(
        "a_command_past_its_own_memory_leaves_none_of_its_processes_running",
        |who| {
            let dir = tempdir("session-limits");
            let s = session(dir.path(), |r| r);
            // The memory is held by a child of the command's first process, which goes on
            // holding it after the first one is gone unless something ends it too.
            let holder = "import time; b = b'x' * (200 << 20); print('held', flush=True); \
                          time.sleep(60)";
            let script = format!("python3 -c \"{holder}\" holder-over; echo after");
            let r = s
                .spawn(&Command::new(["/bin/bash", "-c", &script]).memory(96 * MIB))
                .unwrap()
                .wait();
            assert_eq!(r.limits_hit, ["memory"], "{who:?}: {}", show(&r));
            assert!(!r.stdout.contains("held"), "{who:?}: {}", show(&r));
            // With a memory cgroup its out-of-memory killer picks the holder (the first
            // process goes on to say `after`); without one the host's watchdog ends every
            // process of the command.
            assert!(!running(&s, "holder-over"), "{who:?}: the holder survived");
            // Control: a process a command leaves running is seen by the same check.
            let left = "python3 -c 'import time; time.sleep(60)' holder-left & exit 0";
            let r = s
                .spawn(&Command::new(["/bin/bash", "-c", left]))
                .unwrap()
                .wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {}", show(&r));
            let mut seen = false;
            for _ in 0..50 {
                seen = running(&s, "holder-left");
                if seen {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            assert!(seen, "{who:?}: the background process was not seen");
            s.end();
        },
    );
}

/// Python forking `want` children that sleep, then printing how many forks succeeded.
fn forks(want: u32) -> Command {
    Command::new([
        "/usr/bin/python3",
        "-c",
        &format!(
            "import os, time\n\
             n = 0\n\
             for i in range({want}):\n\
             \x20   try:\n\
             \x20       pid = os.fork()\n\
             \x20   except OSError:\n\
             \x20       break\n\
             \x20   if pid == 0:\n\
             \x20       time.sleep(1)\n\
             \x20       os._exit(0)\n\
             \x20   n += 1\n\
             print(n)\n"
        ),
    ])
}

#[test]
fn a_commands_process_limit_refuses_its_forks() {
    as_both("a_commands_process_limit_refuses_its_forks", |who| {
        let dir = tempdir("session-limits");
        let s = session(dir.path(), |r| r);
        let limited = s.spawn(&forks(20).processes(8));
        if !has_cgroups(who) {
            // No pids cgroup: the limit cannot be held, so the command does not run.
            let e = limited.expect_err("a process limit without a pids cgroup");
            assert_eq!(e.field(), "limits.processes", "{who:?}: {e}");
            assert!(e.reason().contains("no pids cgroup"), "{who:?}: {e}");
        } else {
            let r = limited.unwrap().wait();
            let n: u32 = r.stdout.trim().parse().unwrap_or(99);
            assert!(n < 8, "{who:?}: {}", show(&r));
            assert_eq!(r.limits_hit, ["processes"], "{who:?}: {}", show(&r));
            assert!(
                r.warnings.iter().any(|w| w.contains(
                    "refused at the command's process limit of 8; raise the command's \
                     limits.processes"
                )),
                "{who:?}: {}",
                show(&r)
            );
        }
        // Control: the same forks under a larger limit (or none) all succeed.
        let cmd = if has_cgroups(who) {
            forks(20).processes(64)
        } else {
            forks(20)
        };
        let r = s.spawn(&cmd).unwrap().wait();
        assert_eq!(r.stdout, "20\n", "{who:?}: {}", show(&r));
        assert!(r.limits_hit.is_empty(), "{who:?}: {}", show(&r));
        s.end();
    });
}

#[test]
fn hostile_command_limits_are_refused_and_change_nothing() {
    as_both(
        "hostile_command_limits_are_refused_and_change_nothing",
        |who| {
            let dir = tempdir("session-limits");
            let s = session(dir.path(), |r| {
                let mut r = r;
                r.limits.memory_bytes = Some(256 * MIB);
                r.limits.processes = Some(100);
                r
            });
            let refused = |c: Command, field: &str| {
                let e = s.spawn(&c).expect_err("refused");
                assert_eq!(e.field(), field, "{who:?}: {e}");
            };
            let t = || Command::new(["/bin/true"]);
            refused(t().memory(0), "limits.memory_bytes");
            refused(t().memory(MIB), "limits.memory_bytes");
            refused(t().memory(257 * MIB), "limits.memory_bytes");
            refused(t().memory(u64::MAX), "limits.memory_bytes");
            refused(t().processes(0), "limits.processes");
            refused(t().processes(101), "limits.processes");
            refused(t().processes(u64::MAX), "limits.processes");
            // Nothing was made: the session runs on, and the largest allowed values are taken.
            let r = s
                .spawn(&Command::new(["/bin/echo", "ok"]).memory(256 * MIB))
                .unwrap()
                .wait();
            assert_eq!(r.stdout, "ok\n", "{who:?}: {}", show(&r));
            assert!(r.warnings.is_empty(), "{who:?}: {}", show(&r));
            s.end();
        },
    );
}

#[test]
fn a_refused_write_is_named_in_its_own_commands_result_only() {
    as_both(
        "a_refused_write_is_named_in_its_own_commands_result_only",
        |who| {
            let dir = tempdir("session-limits");
            let outside = tempdir("session-outside");
            let target = outside.path().join("written");
            let t = target.to_str().unwrap();
            let s = session(dir.path(), |r| r);
            let first = s
                .spawn(&Command::new(["/usr/bin/touch", t]))
                .unwrap()
                .wait();
            assert_ne!(first.exit_code, Some(0), "{who:?}: {}", show(&first));
            assert!(!target.exists(), "{who:?}");
            assert_eq!(first.refusals.len(), 1, "{who:?}: {:#?}", first.refusals);
            let entry = &first.refusals[0];
            assert_eq!(entry.path.as_deref(), Some(t), "{who:?}: {entry:?}");
            // Worded for a library (JSON) caller: a request field, not a flag.
            let allow = entry.allow.as_deref().unwrap_or("");
            assert!(allow.contains("\"writable_paths\""), "{who:?}: {allow}");
            assert!(
                first
                    .warnings
                    .iter()
                    .any(|w| w.contains(t) && w.contains("\"writable_paths\"")),
                "{who:?}: {}",
                show(&first)
            );
            // The next command, quiet and allowed, has no refusal of the first's.
            let next = s
                .spawn(&Command::new(["/usr/bin/touch", "in-workspace"]))
                .unwrap()
                .wait();
            assert_eq!(next.exit_code, Some(0), "{who:?}: {}", show(&next));
            assert!(next.refusals.is_empty(), "{who:?}: {:?}", next.refusals);
            assert!(next.warnings.is_empty(), "{who:?}: {}", show(&next));
            s.end();
            // Control: in a session where that directory is writable the write happens.
            let open = session(dir.path(), |r| {
                let mut r = r;
                r.writable_paths
                    .push(outside.path().to_str().unwrap().into());
                r
            });
            let r = open
                .spawn(&Command::new(["/usr/bin/touch", t]))
                .unwrap()
                .wait();
            assert_eq!(r.exit_code, Some(0), "{who:?}: {}", show(&r));
            assert!(target.exists(), "{who:?}");
            assert!(r.refusals.is_empty(), "{who:?}: {:?}", r.refusals);
            open.end();
        },
    );
}

/// A local HTTP server answering `reached` to each connection; counts them.
fn http_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let h = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            h.fetch_add(1, Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(500)));
            let _ = s.read(&mut [0u8; 4096]);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nreached\n",
            );
        }
    });
    (port, hits)
}

#[test]
fn each_command_lists_the_destinations_it_tried_through_the_sessions_proxy() {
    as_both(
        "each_command_lists_the_destinations_it_tried_through_the_sessions_proxy",
        |who| {
            let (port, hits) = http_server();
            let dir = tempdir("session-net");
            let s = session(dir.path(), |mut r| {
                r.network = Some(sandbox_host::network::Mode::Proxy);
                r.allow_domains = vec!["api.test".into()];
                for name in ["api.test", "pkg.test"] {
                    r.resolve
                        .insert(format!("{name}:{port}"), "127.0.0.1".into());
                }
                r
            });
            let curl = |name: &str, wait: &str| {
                let script = format!(
                    "sleep {wait}; curl -sS --max-time 10 http://{name}:{port}/; \
                     curl -sS --max-time 10 http://{name}:{port}/again"
                );
                Command::new(["/bin/bash", "-c", &script])
            };
            // Two commands at once, each trying one name twice; then a quiet one.
            let allowed = s.spawn(&curl("api.test", "0.2")).unwrap();
            let refused = s.spawn(&curl("pkg.test", "0.2")).unwrap();
            let (allowed, refused) = (allowed.wait(), refused.wait());
            let quiet = s.spawn(&Command::new(["/bin/true"])).unwrap().wait();
            let hosts = |r: &ExecResult| -> Vec<(String, bool, u64)> {
                r.network
                    .destinations
                    .iter()
                    .map(|d| (d.host.clone(), d.allowed, d.attempts))
                    .collect()
            };
            assert_eq!(
                allowed.stdout,
                "reached\nreached\n",
                "{who:?}: {}",
                show(&allowed)
            );
            assert_eq!(
                hosts(&allowed),
                [("api.test".to_string(), true, 2)],
                "{who:?}: {}",
                show(&allowed)
            );
            assert_eq!(
                hosts(&refused),
                [("pkg.test".to_string(), false, 2)],
                "{who:?}: {}",
                show(&refused)
            );
            assert_eq!(allowed.network.proxy.as_deref(), Some("127.0.0.1:3128"));
            // The refusal is named in the result of the command that tried it, and no other.
            let names = |r: &ExecResult| {
                r.refusals
                    .iter()
                    .any(|f| serde_json::to_string(f).unwrap().contains("pkg.test"))
            };
            assert!(names(&refused), "{who:?}: {:?}", refused.refusals);
            assert!(!names(&allowed), "{who:?}: {:?}", allowed.refusals);
            assert!(quiet.network.destinations.is_empty(), "{who:?}");
            assert!(quiet.refusals.is_empty(), "{who:?}: {:?}", quiet.refusals);
            // Control: the proxy reached the server for the allowed name only.
            assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
            s.end();
        },
    );
}
