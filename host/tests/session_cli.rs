//! `sandbox session start|end|list` and `sandbox run --session ID`, as an agent's shell runs
//! them: through `bash -c`, from a bare environment with stdin /dev/null, as root and as uid
//! 65534 (docs/sessions.md, "From a shell").

mod common;

use common::{command, sandbox, As, BOTH, SANDBOX};
use std::path::Path;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch directory `who` may use as its workspace and working directory.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

/// `script` run by `bash -c` as `who` in `dir`, with `$S` the sandbox binary and `$DIR` the
/// directory.
fn bash(who: As, dir: &Path, script: &str) -> Output {
    command(who, "bash")
        .arg("-c")
        .arg(script)
        .env("S", SANDBOX)
        .env("DIR", dir)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Starts a session as `who` in `dir` with `flags` (`.` stands for `dir`); its id.
fn start(who: As, dir: &Path, flags: &[&str]) -> String {
    let flags: Vec<&str> = flags
        .iter()
        .map(|f| if *f == "." { dir.to_str().unwrap() } else { f })
        .collect();
    let o = sandbox(who)
        .args(["session", "start"])
        .args(&flags)
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{who:?} {flags:?}: {o:?}");
    assert!(o.stderr.is_empty(), "{who:?}: {o:?}");
    let id = text(&o.stdout).trim().to_string();
    assert_eq!(id.len(), 24, "{o:?}");
    id
}

fn end(who: As, id: &str) {
    let o = sandbox(who).args(["session", "end", id]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
}

/// This user's sessions, as `session list --json` gives them.
fn list(who: As) -> Vec<serde_json::Value> {
    let o = sandbox(who)
        .args(["session", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The whole life of a session from a shell: `start` returns inside `$(...)`; a server
/// started in the background by one `run --session` answers a second one's curl; exit
/// statuses are `run`'s (1, 128+N); stdin is piped through; a forwarded SIGTERM ends the
/// command; `list` shows the session; `end` kills the server, which was alive just before
/// (the control), and removes the session from the list.
#[test]
fn a_session_holds_a_server_between_commands_and_ends_with_everything_in_it() {
    holds_a_server_and_ends_with_it(&[], 0);
}

/// In the contained tier (no PID namespace) and, as uid 65534, without a cgroup: nothing but
/// the session itself can end what its commands left running.
#[test]
fn a_contained_session_ends_with_everything_in_it_too() {
    holds_a_server_and_ends_with_it(&["--isolation", "off", "--allow-root"], 2);
}

/// A session started with `flags` keeps a background server between commands, and `session
/// end` leaves none of it running. `offset` keeps the tests' ports apart.
fn holds_a_server_and_ends_with_it(flags: &[&str], offset: usize) {
    for (k, who) in BOTH.into_iter().enumerate() {
        let dir = scratch();
        let port = 20_000 + (std::process::id() % 20_000) as usize + k + offset;
        let script = format!(
            r#"
            id=$("$S" session start --profile shell-network --workspace "$DIR" $FLAGS) || exit 90
            echo "id=$id"
            "$S" run --session "$id" -- bash -c "$SERVER >/dev/null 2>&1 &"
            echo "bg=$?"
            for i in $(seq 50); do
                code=$("$S" run --session "$id" -- curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/) && break
                sleep 0.2
            done
            echo "curl=$code"
            "$S" run --session "$id" -- false; echo "false=$?"
            "$S" run --session "$id" -- bash -c 'kill -KILL $$'; echo "killed=$?"
            echo hi | "$S" run --session "$id" -- cat; echo "cat=$?"
            "$S" run --session "$id" -- sleep 30 & client=$!
            sleep 1; kill -TERM $client; wait $client; echo "term=$?"
            "$S" session list --json
            pgrep -f "^python3 -m [h]ttp.server {port}" >/dev/null && echo "before=alive"
            "$S" session end "$id"; echo "end=$?"
            pgrep -f "^python3 -m [h]ttp.server {port}" >/dev/null && echo "after=alive" || echo "after=gone"
            "$S" session list --json
            "#
        );
        // The server's command line comes from the environment: this script's own (which
        // pgrep also sees) then does not hold it.
        let o = command(who, "bash")
            .arg("-c")
            .arg(&script)
            .env("S", SANDBOX)
            .env("DIR", dir.path())
            .env("FLAGS", flags.join(" "))
            .env(
                "SERVER",
                format!("python3 -m http.server {port} --bind 127.0.0.1"),
            )
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = text(&o.stdout);
        let err = text(&o.stderr);
        let id = out
            .lines()
            .find_map(|l| l.strip_prefix("id="))
            .unwrap_or_else(|| panic!("{who:?}: {out}\n{err}"))
            .to_string();
        for want in [
            "bg=0",
            "curl=200",
            "false=1",
            "killed=137",
            "hi\ncat=0",
            "term=143",
            "before=alive",
            "end=0",
            "after=gone",
        ] {
            assert!(out.contains(want), "{who:?}: {want}: {out}\n{err}");
        }
        let listed: Vec<&str> = out.lines().filter(|l| l.starts_with('[')).collect();
        assert_eq!(listed.len(), 2, "{who:?}: {out}");
        assert!(listed[0].contains(&id), "{who:?}: {out}");
        assert!(listed[0].contains("\"profile\":\"shell-network\""), "{out}");
        assert!(!listed[1].contains(&id), "{who:?}: {out}");
        // Nothing on stderr when all is well (the killed command's status is its own); a
        // session below the isolated tier says what it misses, in warnings only.
        if flags.is_empty() {
            assert!(err.is_empty(), "{who:?}: {err}");
        } else {
            for l in err.lines() {
                assert!(l.starts_with("sandbox: warning: "), "{who:?}: {err}");
                // In a command line's words: flags, not request fields.
                assert!(!l.contains("\": "), "{who:?}: {l}");
            }
        }
    }
}

/// A call the profile refuses is named on stderr as `run` names it; the control: the same
/// command in a session whose profile allows it runs without a line.
#[test]
fn a_refused_call_is_named_on_stderr() {
    for who in BOTH {
        let dir = scratch();
        let refusing = start(who, dir.path(), &[]);
        let allowing = start(
            who,
            dir.path(),
            &["--profile", "shell-network", "--workspace", "."],
        );
        let probe = "python3 -c 'import socket; socket.socket()'";
        let script = format!(
            r#""$S" run --session {refusing} -- {probe}; echo "refused=$?"
               "$S" run --session {allowing} -- {probe}; echo "allowed=$?""#
        );
        let o = bash(who, dir.path(), &script);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        end(who, &refusing);
        end(who, &allowing);
        assert!(out.contains("allowed=0"), "{who:?}: {out}\n{err}");
        assert!(out.contains("refused=1"), "{who:?}: {out}\n{err}");
        let named: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("sandbox: ") && l.contains("was refused socket (41)"))
            .collect();
        assert_eq!(named.len(), 1, "{who:?}: {err}");
    }
}

/// Hostile ids are refused before anything is looked up: one line, exit 125, nothing on
/// stdout, nothing made in the state directory. (A NUL cannot reach a program's arguments.)
/// An id of the right form that no session has is refused naming `session list`.
#[test]
fn hostile_and_unknown_ids_are_refused_and_touch_nothing() {
    for who in BOTH {
        let dir = scratch();
        let id = start(who, dir.path(), &[]);
        let sessions = list(who);
        let socket = sessions
            .iter()
            .find(|s| s["id"] == id.as_str())
            .and_then(|s| s["socket"].as_str())
            .unwrap_or_else(|| panic!("{who:?} {id}: {sessions:?}"))
            .to_string();
        let state = Path::new(&socket).parent().unwrap().to_path_buf();
        // Other tests of this binary start and end sessions meanwhile: what is checked is
        // that nothing but sessions' sockets is there afterwards.
        let only_sockets = || {
            for e in std::fs::read_dir(&state).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".sock").unwrap_or("");
                assert!(
                    id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                    "{who:?}: {name} in {}",
                    state.display()
                );
            }
        };
        only_sockets();
        let huge = "a".repeat(100_000);
        for bad in [
            "../x",
            "",
            "a\nb",
            huge.as_str(),
            "/etc/passwd",
            "ABCDEF0123456789ABCDEF01",
            &format!("{id}/"),
            &format!("../sessions/{id}"),
        ] {
            for args in [
                vec!["run", "--session", bad, "--", "true"],
                vec!["session", "end", bad],
            ] {
                let o = sandbox(who).args(&args).output().unwrap();
                let err = text(&o.stderr);
                assert_eq!(o.status.code(), Some(125), "{who:?} {args:?}: {o:?}");
                assert!(o.stdout.is_empty(), "{o:?}");
                assert_eq!(err.lines().count(), 1, "{err}");
                assert!(err.contains("is not a session id"), "{err}");
            }
        }
        let o = sandbox(who)
            .args(["session", "end", "0123456789abcdef01234567"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(125), "{o:?}");
        assert!(
            text(&o.stderr).contains("no session 0123456789abcdef01234567"),
            "{o:?}"
        );
        only_sockets();
        assert!(!state.parent().unwrap().join("x.sock").exists());
        // The session was not touched either.
        assert!(list(who).iter().any(|s| s["id"] == id.as_str()));
        end(who, &id);
    }
}

/// Usage errors exit 2 naming the conflict (a policy flag with `--session`); flags that parse
/// and are refused exit 125 naming the flag; neither starts a session.
#[test]
fn bad_flags_are_named_and_start_nothing() {
    for who in BOTH {
        let dir = scratch();
        let id = "0123456789abcdef01234567";
        for (args, status, want) in [
            (
                vec![
                    "run",
                    "--session",
                    id,
                    "--profile",
                    "unrestricted",
                    "--",
                    "true",
                ],
                2,
                "'--session <ID>' cannot be used with '--profile <PROFILE>'",
            ),
            (
                vec!["run", "--session", id, "--network", "host", "--", "true"],
                2,
                "cannot be used with '--network <MODE>'",
            ),
            (
                vec!["run", "--session", id, "--env", "A=b", "--", "true"],
                2,
                "cannot be used with '--env <NAME=VALUE>'",
            ),
            (vec!["session", "end"], 2, "<ID>"),
            (vec!["session", "start", "--idle", "soon"], 2, "--idle"),
            (
                vec!["session", "start", "--idle", "0"],
                125,
                "--idle: must be between 1",
            ),
            (
                vec!["session", "start", "--idle", "86401"],
                125,
                "--idle: must be between 1",
            ),
            (
                vec!["session", "start", "--timeout", "0"],
                125,
                "--timeout: ",
            ),
            (
                vec!["session", "start", "--profile", "no-such"],
                125,
                "--profile",
            ),
            (
                vec![
                    "session",
                    "start",
                    "--profile",
                    "shell",
                    "--workspace",
                    "rel",
                ],
                125,
                "--workspace",
            ),
            (
                vec!["session", "start", "--env", "LD_PRELOAD=/x.so"],
                125,
                "--env `LD_PRELOAD`",
            ),
            (
                vec!["session", "start", "--on-violation", "log"],
                125,
                "--on-violation log",
            ),
        ] {
            let o = sandbox(who)
                .args(&args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(status), "{who:?} {args:?}: {err}");
            assert!(err.contains(want), "{who:?} {args:?}: {err}");
            assert!(o.stdout.is_empty(), "{who:?} {args:?}: {o:?}");
            if status == 125 {
                assert_eq!(err.lines().count(), 1, "{err}");
            }
        }
        // Sessions of other tests may come and go meanwhile: none is this directory's.
        let cwd = dir.path().to_str().unwrap();
        assert!(!list(who).iter().any(|s| s["cwd"] == cwd), "{who:?}");
    }
}

/// A command inside a sandbox cannot use a session's control socket: not from inside the
/// session, not from a plain `run --profile shell-network` (the view hides the socket), and
/// not from a run whose view shows it (`--isolation off --landlock off`: the daemon refuses
/// the peer, naming why). The control: the same probe from outside gets the session's answer.
#[test]
fn sandboxed_commands_cannot_reach_a_session_daemon() {
    for who in BOTH {
        let dir = scratch();
        let probe = dir.path().join("probe.py");
        std::fs::write(
            &probe,
            "import socket, sys\n\
             try:\n\
             \x20   s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n\
             \x20   s.connect(sys.argv[1])\n\
             \x20   s.send(b'{\"op\":\"info\"}')\n\
             \x20   print('reply', s.recv(65536).decode())\n\
             except OSError as e:\n\
             \x20   print('error', e)\n",
        )
        .unwrap();
        let id = start(
            who,
            dir.path(),
            &["--profile", "shell-network", "--workspace", "."],
        );
        let socket = list(who)
            .iter()
            .find(|s| s["id"] == id.as_str())
            .and_then(|s| s["socket"].as_str())
            .expect("listed")
            .to_string();
        let script = format!(
            r#"p="$DIR/probe.py"; sock='{socket}'
            echo "outside: $(python3 "$p" "$sock")"
            echo "session: $("$S" run --session {id} -- python3 "$p" "$sock")"
            echo "run: $("$S" run --allow-root --profile shell-network --workspace "$DIR" -- python3 "$p" "$sock")"
            echo "bare: $("$S" run --allow-root --profile shell-network --workspace "$DIR" --isolation off --landlock off -- python3 "$p" "$sock")"
            "#
        );
        let o = bash(who, dir.path(), &script);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        end(who, &id);
        let line = |k: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_else(|| panic!("{who:?} {k}: {out}\n{err}"))
                .to_string()
        };
        assert!(
            line("outside: ").contains(&format!("\"id\":\"{id}\"")),
            "{out}\n{err}"
        );
        for k in ["session: ", "run: ", "bare: "] {
            let l = line(k);
            assert!(!l.contains(&id), "{who:?} {k}{l}");
            assert!(
                l.starts_with("error") || l.contains("refused"),
                "{who:?} {k}{l}"
            );
        }
        let bare = line("bare: ");
        assert!(
            bare.contains("a sandboxed command may not use"),
            "{who:?}: {bare}"
        );
    }
}

/// A session ends after its idle time: its daemon removes the socket and exits.
#[test]
fn an_idle_session_ends_and_its_socket_goes() {
    for who in BOTH {
        let dir = scratch();
        let id = start(who, dir.path(), &["--idle", "1"]);
        let socket = list(who)
            .iter()
            .find(|s| s["id"] == id.as_str())
            .and_then(|s| s["socket"].as_str())
            .expect("listed")
            .to_string();
        assert!(Path::new(&socket).exists());
        let t = std::time::Instant::now();
        while Path::new(&socket).exists() && t.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(
            !Path::new(&socket).exists(),
            "{who:?}: still there after 10 s"
        );
        assert!(!list(who).iter().any(|s| s["id"] == id.as_str()));
        let o = sandbox(who)
            .args(["run", "--session", &id, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(125), "{o:?}");
        assert!(text(&o.stderr).contains("no session"), "{o:?}");
    }
}

/// A caller that goes away (killed) takes its command with it, as `run`'s host does; the
/// control: the command was alive before. `--timeout` with `--session` ends the command with
/// 124 and `run`'s one line; a megabyte of stdin arrives whole.
#[test]
fn a_killed_caller_takes_its_command_and_timeouts_are_124() {
    for who in BOTH {
        let dir = scratch();
        let script = r#"
            id=$("$S" session start --profile shell --workspace "$DIR") || exit 90
            "$S" run --session "$id" --timeout 1 -- sleep 5; echo "timeout=$?"
            head -c 1000000 /dev/zero | "$S" run --session "$id" -- wc -c
            "$S" run --session "$id" -- sh -c 'exec sleep 101' & c=$!
            sleep 1; pgrep -fx "sleep 101" >/dev/null && echo "before=alive"
            kill -KILL $c; wait $c 2>/dev/null; sleep 0.5
            pgrep -fx "sleep 101" >/dev/null && echo "after=alive" || echo "after=gone"
            "$S" session end "$id"; echo "end=$?"
            "#;
        let o = bash(who, dir.path(), script);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        for want in [
            "timeout=124",
            "1000000",
            "before=alive",
            "after=gone",
            "end=0",
        ] {
            assert!(out.contains(want), "{who:?}: {want}: {out}\n{err}");
        }
        let timed_out: Vec<&str> = err.lines().filter(|l| l.contains("timed out")).collect();
        assert_eq!(timed_out.len(), 1, "{who:?}: {err}");
        assert!(
            timed_out[0].starts_with("sandbox: sleep timed out after 1s"),
            "{err}"
        );
    }
}

/// The caller's program on a terminal of 100x40 (a pty of this test's), set to 120x50 after
/// 1.5 s with SIGWINCH to the caller, as the kernel would send its foreground group, and with
/// `KEYS` typed after 1 s; what the terminal showed, and the exit status.
const PTY_PROBE: &str = r#"
import os, pty, sys, fcntl, termios, struct, subprocess, time, signal, select
m, s = pty.openpty()
fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, close_fds=True)
os.close(s)
out, t, typed, resized = b"", time.time(), False, False
while True:
    now = time.time() - t
    if not typed and now > 1.0:
        os.write(m, os.environ.get("KEYS", "").encode()); typed = True
    if not resized and now > 1.5:
        fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
        p.send_signal(signal.SIGWINCH); resized = True
    if select.select([m], [], [], 0.1)[0]:
        try:
            d = os.read(m, 4096)
        except OSError:
            break
        if not d:
            break
        out += d
    elif p.poll() is not None:
        break
print(repr(out.decode(errors="replace")))
print("status", p.wait())
"#;

/// A caller on a terminal gets one in the session: `stty size` shows the caller's size, and
/// the new one after a resize; a typed ^C reaches the command as SIGINT from its terminal
/// (130). The control: without a terminal, `stty` fails (pipes, as before).
#[test]
fn a_caller_with_a_terminal_gets_one_with_its_size_and_keys() {
    for who in BOTH {
        let dir = scratch();
        std::fs::write(dir.path().join("probe.py"), PTY_PROBE).unwrap();
        let id = start(who, dir.path(), &["--profile", "shell", "--workspace", "."]);
        let script = format!(
            r#"p="$DIR/probe.py"
            python3 "$p" "$S" run --session {id} -- sh -c 'stty size; sleep 2.5; stty size; exit 3'
            KEYS=$(printf '\003') python3 "$p" "$S" run --session {id} -- sleep 30
            "$S" run --session {id} -- stty size; echo "control=$?"
            "#
        );
        let o = bash(who, dir.path(), &script);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        end(who, &id);
        assert!(
            out.contains("'40 100\\r\\n50 120\\r\\n'\nstatus 3"),
            "{who:?}: {out}\n{err}"
        );
        assert!(out.contains("status 130"), "{who:?}: {out}\n{err}");
        assert!(out.contains("control=1"), "{who:?}: {out}\n{err}");
    }
}

/// A write outside the session's writable places is named on the stderr of the `run
/// --session` that made it, worded as flags (the session's policy came from `session start`'s
/// flags), and the next command's stderr is empty. Control: in a session started with
/// `--allow-write` for that directory the same write happens, and nothing is named.
#[test]
fn a_refused_write_is_named_as_a_flag_on_its_own_commands_stderr() {
    for who in BOTH {
        let dir = scratch();
        // Outside the session's private /tmp, so that the write is refused, not missing.
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::set_permissions(
            outside.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let target = outside.path().join("written");
        let script = r#"
            id=$("$S" session start --profile shell --workspace "$DIR") || exit 90
            "$S" run --session "$id" -- touch "$TARGET" 2>first.err; echo "first=$?"
            "$S" run --session "$id" -- touch inside 2>next.err; echo "next=$?"
            "$S" session end "$id"
            id=$("$S" session start --profile shell --workspace "$DIR" --allow-write "$OUTSIDE") || exit 91
            "$S" run --session "$id" -- touch "$TARGET" 2>open.err; echo "open=$?"
            "$S" session end "$id"
        "#;
        let o = command(who, "bash")
            .arg("-c")
            .arg(script)
            .env("S", SANDBOX)
            .env("DIR", dir.path())
            .env("OUTSIDE", outside.path())
            .env("TARGET", &target)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = text(&o.stdout);
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap_or_default();
        let (first, next, open) = (read("first.err"), read("next.err"), read("open.err"));
        assert!(out.contains("first=1\n"), "{who:?}: {o:?}\n{first}");
        let t = target.to_str().unwrap();
        assert!(
            first.lines().any(|l| l.starts_with("sandbox: ")
                && l.contains(t)
                && l.contains(&format!("--allow-write {}", outside.path().display()))),
            "{who:?}: {first}"
        );
        assert!(!first.contains("writable_paths"), "{who:?}: {first}");
        assert!(out.contains("next=0\n"), "{who:?}: {o:?}");
        assert_eq!(next, "", "{who:?}");
        // Control: allowed, the write happens and nothing is named.
        assert!(out.contains("open=0\n"), "{who:?}: {o:?}\n{open}");
        assert!(target.exists(), "{who:?}");
        assert_eq!(open, "", "{who:?}");
    }
}

/// `run --session --memory BYTES`: the command's own memory limit ends it (137, a `limit hit:
/// memory` line naming `--memory`) and the session runs the next command; control: the same
/// allocation under a larger limit of its own prints `done`. Values out of range are refused
/// as 125 naming the flag, values that do not parse are usage errors (2), and none of them
/// starts anything; without `--session` the flags are a one-shot run's own limits.
#[test]
fn a_commands_own_memory_limit_from_a_shell() {
    for who in BOTH {
        let dir = scratch();
        let script = r#"
            id=$("$S" session start --profile shell --workspace "$DIR") || exit 90
            alloc="b = b'x' * (200 << 20); print('done')"
            "$S" run --session "$id" --memory 100663296 -- python3 -c "$alloc" 2>big.err; echo "big=$?"
            "$S" run --session "$id" --memory 419430400 -- python3 -c "$alloc"; echo "ok=$?"
            "$S" run --session "$id" --memory 1 -- true 2>small.err; echo "small=$?"
            "$S" run --session "$id" --memory 99999999999999 -- true 2>huge.err; echo "huge=$?"
            "$S" run --session "$id" --processes 0 -- true 2>zero.err; echo "zero=$?"
            "$S" run --session "$id" --memory x -- true 2>/dev/null; echo "word=$?"
            "$S" run --session "$id" --memory -1 -- true 2>/dev/null; echo "negative=$?"
            "$S" run --memory 96M -- true; echo "alone=$?"
            "$S" run --processes 8 -- true; echo "alone_p=$?"
            "$S" run --session "$id" -- echo after; echo "after=$?"
            "$S" session end "$id"
        "#;
        let o = bash(who, dir.path(), script);
        let out = text(&o.stdout);
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap_or_default();
        let big = read("big.err");
        assert!(out.contains("big=137\n"), "{who:?}: {out}\n{big}");
        assert!(
            big.contains("sandbox: limit hit: memory: ") && big.contains("--memory"),
            "{who:?}: {big}"
        );
        assert!(out.contains("done\nok=0\n"), "{who:?}: {out}");
        for (name, flag) in [
            ("small", "--memory"),
            ("huge", "--memory"),
            ("zero", "--processes"),
        ] {
            assert!(out.contains(&format!("{name}=125\n")), "{who:?}: {out}");
            let e = read(&format!("{name}.err"));
            assert!(e.starts_with(&format!("sandbox: {flag}: ")), "{who:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{who:?}: {e}");
        }
        for name in ["word", "negative"] {
            assert!(out.contains(&format!("{name}=2\n")), "{who:?}: {out}");
        }
        // Without --session, the same flags are the one-shot run's own limits.
        for name in ["alone", "alone_p"] {
            assert!(out.contains(&format!("{name}=0\n")), "{who:?}: {out}");
        }
        assert!(out.contains("after\nafter=0\n"), "{who:?}: {out}");
    }
}

#[test]
fn session_end_exits_0_whenever_the_session_ended() {
    // The daemon used to exit as soon as its session had ended, sometimes before the
    // connection that asked for the end had sent its answer: `session end` then said "the
    // session's daemon closed the connection" and exited 125 for a session that had ended.
    for who in BOTH {
        let dir = scratch();
        let o = bash(
            who,
            dir.path(),
            "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do \
               id=$($S session start --profile shell --workspace \"$DIR\") || exit 90; \
               $S run --session \"$id\" -- true || exit 91; \
               $S session end \"$id\"; rc=$?; echo \"end $rc\"; \
               if $S session end \"$id\" 2>/dev/null; then echo still-there; fi; \
             done",
        );
        let out = text(&o.stdout);
        assert!(o.status.success(), "{who:?}: {out}{}", text(&o.stderr));
        assert_eq!(
            out.matches("end 0").count(),
            12,
            "{who:?}: {out}{}",
            text(&o.stderr)
        );
        assert!(!out.contains("still-there"), "{who:?}: {out}");
    }
}

#[test]
fn run_session_keeps_the_callers_path_as_run_does() {
    // A toolchain's directory the caller put in PATH after the session started (rustup, nvm,
    // pyenv do this in shell start-up): `run --session` finds its programs and passes PATH
    // on, as `sandbox run` does. Control: the caller's PATH without it gives 127.
    for who in BOTH {
        let dir = scratch();
        let o = bash(
            who,
            dir.path(),
            "mkdir -p \"$DIR/bin\" && printf '#!/bin/sh\\necho tool:$PATH\\n' > \"$DIR/bin/mytool\" && \
             chmod +x \"$DIR/bin/mytool\" && \
             id=$($S session start --profile shell --workspace \"$DIR\") || exit 90; \
             PATH=\"$DIR/bin:$PATH\" $S run --session \"$id\" -- mytool; \
             $S run --session \"$id\" -- mytool; echo \"without: $?\"; \
             $S session end \"$id\"",
        );
        let out = text(&o.stdout);
        let bin = dir.path().join("bin").display().to_string();
        assert!(
            out.contains(&format!("tool:{bin}:")),
            "{who:?}: {out}{}",
            text(&o.stderr)
        );
        assert!(out.contains("without: 127"), "{who:?}: {out}");
    }
}
