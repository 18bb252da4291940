//! Sessions in the contained tier (Landlock and seccomp, no namespaces: `--isolation off`):
//! the session's commands carry the contained tier's claims, and the host's supervising loop
//! of each command makes them within the session's places, as a one-shot run's supervisor
//! does (docs/sessions.md, "The contained tier"). A `chmod` of a file outside the workspace
//! and a `connect` to a host unix socket outside it are refused and named in that command's
//! result only; each attack has its control in the same session with `--landlock off` (the
//! filtered tier), where it lands. Where no listener can be had (a session inside another
//! contained run) the session says the calls are unguarded. As root and as uid 65534, through
//! `bash -c`-style bare environments, `sandbox session start` / `run --session` and `serve`.

mod common;

use common::contained::{owned_dir, text};
use common::{command, sandbox, As, BOTH, PATH, SANDBOX};
use std::io::{BufRead, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};

/// Starts a session as `who` in `ws` (its workspace) with `flags`; its id.
fn start(who: As, ws: &Path, flags: &[&str]) -> String {
    let o = sandbox(who)
        .args(["session", "start", "--allow-root", "--isolation", "off"])
        .args(["--workspace", ws.to_str().unwrap()])
        .args(flags)
        .current_dir(ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{who:?} {flags:?}: {}", text(&o));
    assert!(o.stderr.is_empty(), "{who:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn end(who: As, id: &str) {
    let o = sandbox(who).args(["session", "end", id]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o));
}

/// Ends a session even when an assertion failed first.
struct Ended(As, String);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = sandbox(self.0)
            .args(["session", "end", &self.1])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Kills a process the test started even when an assertion failed first.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `sandbox run --session ID -- argv` as `who`, stdin /dev/null.
fn run(who: As, id: &str, argv: &[&str]) -> Output {
    sandbox(who)
        .args(["run", "--session", id, "--"])
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A file `who` owns in `dir`, mode 0600.
fn victim(who: As, dir: &Path) -> std::path::PathBuf {
    let f = dir.join("rc");
    let _ = std::fs::remove_file(&f);
    std::fs::write(&f, "# rc\n").unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    f
}

fn mode(f: &Path) -> u32 {
    std::fs::metadata(f).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_chmod_outside_the_workspace_is_refused_and_named_in_its_own_commands_result() {
    for who in BOTH {
        let ws = owned_dir(who, "sess-contained-ws");
        let home = owned_dir(who, "sess-contained-home");
        let v = victim(who, home.path());
        let v_s = v.to_str().unwrap();
        let chmod = format!("chmod 666 {v_s}; echo rc=$?");
        let id = start(who, ws.path(), &["--profile", "shell"]);
        let _ended = Ended(who, id.clone());
        // Inside the workspace the supervisor makes the change.
        let o = run(
            who,
            &id,
            &[
                "bash",
                "-c",
                "touch mine && chmod 666 mine && stat -c %a mine",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "666\n", "{who:?}");
        assert!(
            o.stderr.is_empty(),
            "{who:?}: nothing on stderr: {}",
            text(&o)
        );
        // Outside it: refused with EACCES, the file unchanged, the call named with the
        // narrowest change, and no warning that the calls are unguarded.
        let o = run(who, &id, &["bash", "-c", &chmod]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "rc=1\n",
            "{who:?}: {}",
            text(&o)
        );
        assert_eq!(mode(&v), 0o600, "{who:?}: changed");
        assert!(
            err.contains("was refused fchmodat")
                && err.contains(&format!("to allow: --allow-write {v_s}")),
            "{who:?}: {}",
            text(&o)
        );
        assert!(!err.contains("unguarded"), "{who:?}: {err}");
        // Named in that command's result only: the next, quiet, command has nothing.
        let o = run(who, &id, &["true"]);
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{who:?}: {}",
            text(&o)
        );
        end(who, &id);
        // Control: the same session in the filtered tier (Landlock off) lets it land.
        let id = start(who, ws.path(), &["--profile", "shell", "--landlock", "off"]);
        let _ended = Ended(who, id.clone());
        let o = run(who, &id, &["bash", "-c", &chmod]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "rc=0\n",
            "{who:?}: {}",
            text(&o)
        );
        assert_eq!(mode(&v), 0o666, "{who:?} control: unchanged");
        end(who, &id);
    }
}

/// A python3 unix listener as `who` at `dir/sock`, answering `hello` to each connection.
fn listener(who: As, dir: &Path) -> (Killed, String) {
    let sock = dir.join("sock");
    let _ = std::fs::remove_file(&sock);
    let child = command(who, "python3")
        .arg("-c")
        .arg(
            "import socket,sys\n\
             s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)\n\
             print('ready', flush=True)\n\
             while True:\n    c,_=s.accept(); c.sendall(b'hello'); c.close()\n",
        )
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    (child, sock.to_str().unwrap().to_string())
}

const CONNECT: &str = "import socket,sys\n\
    s=socket.socket(socket.AF_UNIX)\n\
    try:\n    s.connect(sys.argv[1]); print(s.recv(16).decode())\n\
    except OSError as e:\n    print('errno', e.errno)\n";

#[test]
fn a_connect_to_a_host_unix_socket_is_refused_unless_the_session_allows_it() {
    for who in BOTH {
        let ws = owned_dir(who, "sess-contained-ws");
        let out = owned_dir(who, "sess-contained-sock");
        let (_server, sock) = listener(who, out.path());
        let cases: [(&[&str], &str); 3] = [
            (&[], "errno 13\n"),
            (&["--allow-unix-socket", &sock], "hello\n"),
            // Control: the filtered tier (Landlock off) reaches the socket.
            (&["--landlock", "off"], "hello\n"),
        ];
        for (flags, expected) in cases {
            let mut all = vec!["--profile", "shell-network"];
            all.extend(flags);
            let id = start(who, ws.path(), &all);
            let _ended = Ended(who, id.clone());
            let o = run(who, &id, &["python3", "-c", CONNECT, &sock]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                expected,
                "{who:?} {flags:?}: {}",
                text(&o)
            );
            if flags.is_empty() {
                assert!(
                    err.contains("was refused connect")
                        && err.contains(&format!("to allow: --allow-unix-socket {sock}")),
                    "{who:?}: {}",
                    text(&o)
                );
            } else {
                assert!(o.stderr.is_empty(), "{who:?} {flags:?}: {}", text(&o));
            }
            end(who, &id);
        }
    }
}

/// `sandbox serve` as `who` in `dir`, or inside `outer` (a contained `sandbox run`'s flags).
struct Served {
    child: std::process::Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Served {
    fn start(who: As, dir: &Path, outer: Option<&[&str]>) -> Served {
        let mut cmd = command(who, SANDBOX);
        if let Some(flags) = outer {
            cmd.args(["run", "--allow-root"]).args(flags);
            cmd.args(["--", SANDBOX]);
        }
        let mut child = cmd
            .arg("serve")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Served { child, lines }
    }

    /// Sends `v` and returns the answer with its id.
    fn ask(&mut self, v: serde_json::Value) -> serde_json::Value {
        let id = v["id"].clone();
        let input = self.child.stdin.as_mut().unwrap();
        writeln!(input, "{v}").unwrap();
        input.flush().unwrap();
        loop {
            let line = self.lines.next().expect("an answer").unwrap();
            let a: serde_json::Value = serde_json::from_str(&line).unwrap();
            if a["id"] == id && a.get("event").is_none() {
                return a;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn warned_unguarded(r: &serde_json::Value) -> bool {
    r["warnings"]
        .as_array()
        .is_some_and(|w| w.iter().any(|l| l.as_str().unwrap().contains("unguarded")))
}

#[test]
fn over_serve_a_commands_refused_chmod_is_in_its_own_result_only() {
    use serde_json::json;
    for who in BOTH {
        let ws = owned_dir(who, "sess-contained-ws");
        let home = owned_dir(who, "sess-contained-home");
        let v = victim(who, home.path());
        let v_s = v.to_str().unwrap();
        let w = ws.path().to_str().unwrap();
        for landlock in ["preferred", "off"] {
            let mut s = Served::start(who, ws.path(), None);
            let a = s.ask(json!({"op": "session_start", "id": "s", "profile": "shell",
                "isolation": "off", "landlock": landlock, "allow_root": true,
                "workspace": w, "cwd": w, "env": {"PATH": PATH}}));
            let session = a["session"].clone();
            assert!(session.is_string(), "{who:?}: {a}");
            let r = s.ask(json!({"op": "start", "id": "c", "session": session,
                "argv": ["chmod", "666", v_s]}));
            let r2 = s.ask(json!({"op": "start", "id": "q", "session": session,
                "argv": ["true"]}));
            assert_eq!(r2["violations"], json!([]), "{who:?}: {r2}");
            assert!(!warned_unguarded(&r2), "{who:?}: {r2}");
            if landlock == "off" {
                // Control: the filtered tier lets the change land.
                assert_eq!(r["exit_code"], 0, "{who:?} control: {r}");
                assert_eq!(mode(&v), 0o666, "{who:?} control");
                continue;
            }
            assert_eq!(r["tier"], "contained", "{who:?}: {r}");
            assert_eq!(r["exit_code"], 1, "{who:?}: {r}");
            assert_eq!(mode(&v), 0o600, "{who:?}: changed");
            let change = format!("\"writable_paths\": [{v_s:?}]");
            assert!(
                r["violations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["syscall"] == "fchmodat" && e["change"] == change.as_str()),
                "{who:?}: {r}"
            );
            // Named once: by its violation entry, not again from chmod's stderr.
            assert_eq!(r["refusals"], json!([]), "{who:?}: {r}");
            assert!(!warned_unguarded(&r), "{who:?}: {r}");
        }
    }
}

const LANDLOCK_CALLS: &str =
    "landlock_create_ruleset:landlock_add_rule:landlock_restrict_self:sendmsg:recvmsg";

#[test]
fn without_a_listener_the_session_says_the_calls_are_unguarded() {
    use serde_json::json;
    for who in BOTH {
        let ws = owned_dir(who, "sess-contained-outer");
        let inner = ws.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&inner, Some(65534), Some(65534)).unwrap();
        }
        let i = inner.to_str().unwrap();
        let w = ws.path().to_str().unwrap();
        // Inside a contained run, whose supervisor holds the one listener the kernel allows:
        // the session's filter answers refused calls itself and says so, and so are the
        // contained tier's calls unguarded by the session (the outer run still keeps them).
        let outer = [
            "--isolation",
            "off",
            "--profile",
            "shell",
            "--allow",
            LANDLOCK_CALLS,
            "--workspace",
            w,
        ];
        let mut s = Served::start(who, ws.path(), Some(&outer));
        let a = s.ask(json!({"op": "session_start", "id": "s", "profile": "shell",
            "isolation": "off", "allow_root": true,
            "workspace": i, "cwd": i, "env": {"PATH": PATH}}));
        let session = a["session"].clone();
        assert!(session.is_string(), "{who:?}: {a}");
        let r = s.ask(json!({"op": "start", "id": "c", "session": session,
            "argv": ["bash", "-c", "touch f && chmod 666 f && stat -c %a f"]}));
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        assert_eq!(r["stdout"], "666\n", "{who:?}: {r}");
        assert_eq!(r["tier"], "contained", "{who:?}: {r}");
        assert!(warned_unguarded(&r), "{who:?}: {r}");
        // Control: outside any sandbox the same session has a listener, and no such warning.
        let mut s = Served::start(who, ws.path(), None);
        let a = s.ask(json!({"op": "session_start", "id": "s", "profile": "shell",
            "isolation": "off", "allow_root": true,
            "workspace": i, "cwd": i, "env": {"PATH": PATH}}));
        let r = s.ask(json!({"op": "start", "id": "c", "session": a["session"],
            "argv": ["true"]}));
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        assert!(!warned_unguarded(&r), "{who:?}: {r}");
    }
}

/// In the isolated tier the view hides the host's sockets that exist when the session starts;
/// one bound after that is refused by the supervisor as a one-shot's is
/// (`isolated_late_sockets.rs`): a session's commands carry the isolated tier's claims too.
/// Control: the filtered tier (`--isolation off --landlock off`) reaches the same late socket.
#[test]
fn an_isolated_sessions_command_cannot_reach_a_socket_bound_after_it_started() {
    for who in BOTH {
        let ws = owned_dir(who, "sess-isolated-ws");
        let out = owned_dir(who, "sess-isolated-sock");
        for (flags, expected) in [
            (&[][..], "errno 13\n"),
            (&["--isolation", "off", "--landlock", "off"][..], "hello\n"),
        ] {
            let o = sandbox(who)
                .args([
                    "session",
                    "start",
                    "--allow-root",
                    "--profile",
                    "shell-network",
                ])
                .args(["--workspace", ws.path().to_str().unwrap()])
                .args(flags)
                .current_dir(ws.path())
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{who:?} {flags:?}: {}", text(&o));
            let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
            let _ended = Ended(who, id.clone());
            // Bound after the session started: its view could not hide it.
            let (_server, sock) = listener(who, out.path());
            let o = run(who, &id, &["python3", "-c", CONNECT, &sock]);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                expected,
                "{who:?} {flags:?}: {}",
                text(&o)
            );
            if flags.is_empty() {
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("was refused connect")
                        && err.contains(&format!("--allow-unix-socket {sock}")),
                    "{who:?}: {}",
                    text(&o)
                );
            }
            end(who, &id);
        }
    }
}
