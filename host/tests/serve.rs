//! `sandbox serve` as agents run it: the built binary, a bare environment, requests as JSON
//! lines on a pipe or a unix socket, results read back by id.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox");
/// A guard against hangs only: no test asserts how long anything takes.
const PATIENCE: Duration = Duration::from_secs(60);

/// The environment agents give their tools.
fn bare(c: &mut Command) -> &mut Command {
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("LANG", "C.UTF-8")
}

/// A `sandbox serve` on pipes; result lines arrive on a channel.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = bare(Command::new(BIN).arg("serve").args(args))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: Some(stderr),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .expect("a result line from the server");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn close(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin, waits for the exit; returns the status and stderr.
    fn finish(mut self) -> (i32, String) {
        self.close();
        let status = wait_with_patience(&mut self.child);
        assert!(
            self.lines.recv_timeout(PATIENCE).is_err(),
            "no line after the last"
        );
        (status, self.stderr.take().unwrap().join().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_with_patience(child: &mut Child) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().expect("exited, not killed");
        }
        assert!(t.elapsed() < PATIENCE, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `cond` holds (or fails the test after a minute).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < PATIENCE, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes whose parent is `parent`, with their command lines (arguments joined by spaces).
fn children(parent: i32) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name is in parentheses and may hold spaces: fields start after `)`.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let mut f = rest.split(' ');
        let state = f.next().unwrap();
        let ppid: i32 = f.next().unwrap().parse().unwrap();
        if ppid != parent || state == "Z" {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        out.push((pid, cmd.trim_end().to_string()));
    }
    out
}

/// The pid of the child of `parent` whose command line is `cmd`, if one runs.
/// A descendant of `parent` running `cmd` (with namespaces, the program is a child of the
/// request's init, itself a child of the server).
fn child_running(parent: i32, cmd: &str) -> Option<i32> {
    let mut level = vec![parent];
    while !level.is_empty() {
        let mut next = Vec::new();
        for p in level {
            for (pid, c) in children(p) {
                if c == cmd {
                    return Some(pid);
                }
                next.push(pid);
            }
        }
        level = next;
    }
    None
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s[s.rfind(')').unwrap() + 2..].starts_with('Z'),
        Err(_) => false,
    }
}

fn count(dir: String) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

fn fds(pid: i32) -> usize {
    count(format!("/proc/{pid}/fd"))
}

fn threads(pid: i32) -> usize {
    count(format!("/proc/{pid}/task"))
}

/// Threads of the server reading a connection (named `sandbox-serve-read`, cut to 15 bytes).
fn readers(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "sandbox-serve-r")
        })
        .count()
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill with a pid of a child this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

fn request(id: &str, argv: &[&str]) -> String {
    json!({"id": id, "argv": argv}).to_string()
}

fn assert_error(v: &Value, id: Value, field: &str) -> String {
    assert_eq!(v["id"], id, "{v}");
    assert_eq!(v["error"]["field"], json!(field), "{v}");
    assert_eq!(v.as_object().unwrap().len(), 2, "only id and error: {v}");
    v["error"]["reason"].as_str().unwrap().to_string()
}

fn tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

// ---- requests that run ----

/// Three requests at once; the test decides the order in which they finish (marker files), so
/// the order of the result lines is the completion order, not the order of the requests.
#[test]
fn results_come_in_completion_order_with_their_ids() {
    let dir = tempdir();
    let wait_for = |name: &str| {
        let m = dir.path().join(name);
        json!([
            "/bin/bash",
            "-c",
            format!(
                "until [ -e {} ]; do sleep 0.01; done; echo {name}",
                m.display()
            )
        ])
    };
    let mut s = Server::start(&["--max-concurrent", "3"]);
    s.send(&json!({"id": "first", "argv": wait_for("a"), "profile": "shell"}).to_string());
    s.send(&json!({"id": "second", "argv": wait_for("b"), "profile": "shell"}).to_string());
    s.send(&request("third", &["/bin/echo", "c"]));
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("third"), json!("c\n"))
    );
    std::fs::write(dir.path().join("b"), "").unwrap();
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("second"), json!("b\n"))
    );
    std::fs::write(dir.path().join("a"), "").unwrap();
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("first"), json!("a\n"))
    );
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["cancelled"], false);
    assert_eq!(
        v["sandboxed"],
        json!({"filter": "exact", "profile": "shell"})
    );
    let (status, stderr) = s.finish();
    assert_eq!(status, 0);
    assert_eq!(stderr, "", "quiet when all is well");
}

#[test]
fn bash_c_runs_under_shell_as_agents_start_it() {
    let mut s = Server::start(&[]);
    s.send(&json!({"id": "sh", "argv": ["/bin/bash", "-c", "echo agent-ok | cat"], "profile": "shell"}).to_string());
    let v = s.recv();
    assert_eq!(v["id"], "sh");
    assert_eq!(v["stdout"], "agent-ok\n", "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["violation"], Value::Null, "{v}");
    assert_eq!(s.finish(), (0, String::new()));
}

/// A violation is reported in the result, as with `exec --json`.
#[test]
fn violation_in_a_result_line() {
    let mut s = Server::start(&[]);
    s.send(&request(
        "net",
        &["/usr/bin/python3", "-c", "import socket; socket.socket()"],
    ));
    let v = s.recv();
    assert_eq!(v["id"], "net");
    assert_eq!(v["violations"][0]["syscall"], "socket", "{v}");
    assert_eq!(v["violation"], Value::Null, "{v}");
    // Asked to, it kills instead.
    s.send(&json!({"id": "kill", "argv": ["/usr/bin/python3", "-c", "import socket; socket.socket(); print('after')"], "on_violation": "kill"}).to_string());
    let v = s.recv();
    assert_eq!(v["signal"], 31, "{v}");
    assert_eq!(v["violation"]["syscall"], "socket", "{v}");
    assert_eq!(v["stdout"], "", "{v}");
    // Control: the same program under `network` is not stopped.
    s.send(&json!({"id": "net2", "argv": ["/usr/bin/python3", "-c", "import socket; socket.socket()"], "profile": "network"}).to_string());
    let v = s.recv();
    assert_eq!(v["violation"], Value::Null, "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(s.finish().0, 0);
}

// ---- bad input: an error line, and the server keeps going ----

#[test]
fn programs_that_cannot_run_get_126_or_127_in_their_error_line() {
    let dir = tempdir();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = script.to_str().unwrap();
    let mut s = Server::start(&[]);
    s.send(&request("x", &[path]));
    let v = s.recv();
    let reason = assert_error(&v, json!("x"), "argv[0]");
    assert!(reason.contains("not executable"), "{reason}");
    assert_eq!(v["error"]["exit_code"], json!(126), "{v}");
    s.send(&request("m", &["no-such-program-here"]));
    let v = s.recv();
    assert_error(&v, json!("m"), "argv[0]");
    assert_eq!(v["error"]["exit_code"], json!(127), "{v}");
    // Control: the same file with its execute bit runs, and a bare name is found in PATH.
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    s.send(&json!({"id": "ok", "argv": [path], "profile": "shell"}).to_string());
    let v = s.recv();
    assert_eq!(v["stdout"], json!("ran\n"), "{v}");
    s.send(&request("bare", &["true"]));
    let v = s.recv();
    assert_eq!(v["exit_code"], json!(0), "{v}");
    assert!(v["program"].as_str().unwrap().ends_with("/true"), "{v}");
    assert_eq!(s.finish(), (0, String::new()));
}

#[test]
fn bad_lines_get_error_lines_and_the_server_keeps_serving() {
    let mut s = Server::start(&[]);
    let cases: &[(&[u8], Value, &str)] = &[
        (b"{not json", Value::Null, "request"),
        (b"[1, 2]", Value::Null, "request"),
        (b"\"argv\"", Value::Null, "request"),
        (
            b"{\"id\": \"n\0\", \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "request",
        ),
        (
            b"{\"id\": \"u\", \"argv\": [\"/bin/true\"], \"shell\": true}",
            json!("u"),
            "shell",
        ),
        (
            b"{\"id\": \"u2\", \"argv\": [\"/bin/true\"], \"limits\": {\"stack\": 1}}",
            json!("u2"),
            "limits.stack",
        ),
        (
            b"{\"id\": \"nul\", \"argv\": [\"/bin/echo\", \"a\\u0000b\"]}",
            json!("nul"),
            "argv[1]",
        ),
        (
            b"{\"id\": \"m\", \"argv\": [\"/nonexistent/program\"]}",
            json!("m"),
            "argv[0]",
        ),
        (
            b"{\"id\": \"rel\", \"argv\": [\"bin/echo\"]}",
            json!("rel"),
            "argv[0]",
        ),
        (b"{\"id\": \"e\", \"argv\": []}", json!("e"), "argv"),
        (b"{\"id\": \"noargv\"}", json!("noargv"), "argv"),
        (
            b"{\"id\": \"env\", \"argv\": [\"/bin/true\"], \"env\": {\"LD_PRELOAD\": \"/x.so\"}}",
            json!("env"),
            "env.LD_PRELOAD",
        ),
        (
            b"{\"id\": \"dup\", \"id\": \"dup2\", \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "request",
        ),
        (
            b"{\"id\": \"d\", \"argv\": [\"/bin/true\"], \"argv\": [\"/bin/false\"]}",
            Value::Null,
            "request",
        ),
        (b"{\"argv\": [\"/bin/true\"]}", Value::Null, "id"),
        (b"{\"id\": 7, \"argv\": [\"/bin/true\"]}", Value::Null, "id"),
        (
            b"{\"id\": null, \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "id",
        ),
        (
            b"{\"id\": \"\", \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "id",
        ),
        (
            b"{\"id\": [\"x\"], \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "id",
        ),
        (
            b"{\"id\": \"t\", \"argv\": [\"/bin/true\"], \"timeout_s\": 1e300}",
            json!("t"),
            "timeout_s",
        ),
        (
            b"{\"id\": \"\xff\", \"argv\": [\"/bin/true\"]}",
            Value::Null,
            "request",
        ),
    ];
    for (line, id, field) in cases {
        let stdin = s.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let v = s.recv();
        let reason = assert_error(&v, id.clone(), field);
        assert!(!reason.is_empty(), "{}", String::from_utf8_lossy(line));
    }
    // An id longer than the limit is not echoed.
    let long = "x".repeat(sandbox_host::exec::json::MAX_ID_BYTES + 1);
    s.send(&request(&long, &["/bin/true"]));
    assert_error(&s.recv(), Value::Null, "id");
    // Blank lines are not requests.
    s.send("");
    s.send("   \r");
    s.send(&request("ok", &["/bin/echo", "still here"]));
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("ok"), json!("still here\n"))
    );
    let (status, stderr) = s.finish();
    assert_eq!(status, 0);
    assert_eq!(stderr, "");
}

/// A 100 MB line is refused without being held in memory: the server's peak resident size
/// stays far below the line, it answers, and it serves the next request.
#[test]
fn a_100_mb_line_is_refused_and_discarded() {
    let mut s = Server::start(&[]);
    let pid = s.pid();
    let mut stdin = s.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 1 << 20];
        stdin
            .write_all(br#"{"id": "big", "argv": ["/bin/echo", ""#)
            .unwrap();
        for _ in 0..100 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\"]}\n").unwrap();
        stdin
            .write_all(request("after", &["/bin/echo", "alive"]).as_bytes())
            .unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin
    });
    let v = s.recv();
    let reason = assert_error(&v, Value::Null, "request");
    assert!(reason.contains("larger than 8388608 bytes"), "{reason}");
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("after"), json!("alive\n"))
    );
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    assert!(
        hwm_kb < 48 * 1024,
        "peak resident {hwm_kb} kB: the line was kept"
    );
    s.stdin = Some(writer.join().unwrap());
    assert_eq!(s.finish(), (0, String::new()));
}

#[test]
fn hostile_options_are_refused_with_125() {
    let dir = tempdir();
    let file = dir.path().join("file");
    std::fs::write(&file, "keep").unwrap();
    let long = format!("/tmp/{}", "s".repeat(110));
    let file_s = file.display().to_string();
    let dir_s = dir.path().display().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["--max-concurrent", "0"], "--max-concurrent"),
        (&["--max-concurrent", "1025"], "--max-concurrent"),
        (&["--max-concurrent", "-1"], "--max-concurrent"),
        (&["--max-concurrent", "abc"], "--max-concurrent"),
        (&["--max-concurrent", ""], "--max-concurrent"),
        (&["--max-concurrent", "1e3"], "--max-concurrent"),
        (
            &["--max-concurrent", "99999999999999999999999999"],
            "--max-concurrent",
        ),
        (&["--socket", ""], "socket"),
        (&["--socket", &long], "longer than 107 bytes"),
        (&["--socket", &file_s], "not a socket"),
        (&["--socket", &dir_s], "not a socket"),
        (&["--socket", "/nonexistent-dir/s.sock"], "cannot listen"),
    ];
    for (args, what) in cases {
        let o: Output = bare(Command::new(BIN).arg("serve").args(*args))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "keep",
        "left alone"
    );
}

// ---- EOF and signals ----

#[test]
fn eof_waits_for_running_requests() {
    let mut s = Server::start(&[]);
    s.send(&json!({"id": "slow", "argv": ["/bin/bash", "-c", "sleep 1; echo done"], "profile": "shell"}).to_string());
    s.close();
    let v = s.recv();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("slow"), json!("done\n"))
    );
    assert_eq!(v["cancelled"], false);
    assert_eq!(s.finish(), (0, String::new()));
}

#[test]
fn sigterm_cancels_running_requests() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let mut s = Server::start(&[]);
        s.send(&request("long", &["/bin/sleep", "311.5"]));
        let pid = s.pid();
        let mut victim = None;
        eventually("the request's sleep runs", || {
            victim = child_running(pid, "/bin/sleep 311.5");
            victim.is_some()
        });
        signal(pid, sig);
        let v = s.recv();
        assert_eq!(v["id"], "long");
        assert_eq!(v["cancelled"], true, "{v}");
        assert_eq!(v["exit_code"], Value::Null, "{v}");
        let (status, stderr) = s.finish();
        assert_eq!(status, 0);
        assert_eq!(stderr, "");
        assert!(!alive(victim.unwrap()), "the request's process is gone");
    }
}

// ---- concurrency ----

/// With `--max-concurrent 1` the second request does not start while the first runs; with 2
/// (the control) both run at once.
#[test]
fn max_concurrent_is_honoured() {
    for (n, both) in [("1", false), ("2", true)] {
        let mut s = Server::start(&["--max-concurrent", n]);
        let pid = s.pid();
        s.send(&request("a", &["/bin/sleep", "312.1"]));
        s.send(&request("b", &["/bin/sleep", "312.2"]));
        eventually("the first request runs", || {
            child_running(pid, "/bin/sleep 312.1").is_some()
        });
        if both {
            eventually("the second request runs too", || {
                child_running(pid, "/bin/sleep 312.2").is_some()
            });
        } else {
            // Give the second every chance to start: it must not.
            std::thread::sleep(Duration::from_secs(1));
            assert_eq!(child_running(pid, "/bin/sleep 312.2"), None, "N=1 ran two");
            assert!(child_running(pid, "/bin/sleep 312.1").is_some());
        }
        signal(pid, libc::SIGTERM);
        let mut got = [s.recv(), s.recv()];
        got.sort_by_key(|v| v["id"].as_str().unwrap_or("").to_string());
        assert_eq!(got[0]["cancelled"], true, "{}", got[0]);
        if both {
            assert_eq!(got[1]["cancelled"], true, "{}", got[1]);
        } else {
            // Queued, never started: answered all the same.
            assert_error(&got[1], json!("b"), "request");
        }
        assert_eq!(s.finish().0, 0);
    }
}

/// No descriptor or thread is left behind per request.
#[test]
fn descriptors_and_threads_stay_flat_over_200_requests() {
    let mut s = Server::start(&["--max-concurrent", "2"]);
    let pid = s.pid();
    let batch = |s: &mut Server, n: usize| {
        for i in 0..n {
            if i % 10 == 0 {
                s.send(&format!("{{\"id\": \"bad{i}\""));
            } else {
                s.send(&json!({"id": format!("r{i}"), "argv": ["/bin/echo", i.to_string()], "stdin": "x"}).to_string());
            }
        }
        for _ in 0..n {
            s.recv();
        }
    };
    batch(&mut s, 20);
    let (f0, t0) = (fds(pid), threads(pid));
    batch(&mut s, 200);
    assert_eq!(fds(pid), f0, "descriptors after 200 more requests");
    assert_eq!(threads(pid), t0, "threads after 200 more requests");
    assert!(children(pid).is_empty(), "no process left");
    assert_eq!(s.finish(), (0, String::new()));
}

// ---- socket mode ----

/// A `sandbox serve --socket` started by `cmd` (maybe under setpriv); killed on drop.
struct SocketServer {
    child: Child,
}

impl SocketServer {
    fn start(mut cmd: Command, path: &Path) -> SocketServer {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        eventually("the server listens", || UnixStream::connect(path).is_ok());
        SocketServer { child }
    }

    fn stop(mut self) -> (i32, String) {
        signal(self.child.id() as i32, libc::SIGTERM);
        let status = wait_with_patience(&mut self.child);
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, err)
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_socket(path: &Path, args: &[&str]) -> SocketServer {
    let mut c = Command::new(BIN);
    bare(&mut c)
        .arg("serve")
        .arg("--socket")
        .arg(path)
        .args(args);
    SocketServer::start(c, path)
}

/// Sends `lines`, half-closes, and reads every line until the server closes.
fn exchange(path: &Path, lines: &[String]) -> Vec<Value> {
    let mut c = UnixStream::connect(path).unwrap();
    for l in lines {
        c.write_all(l.as_bytes()).unwrap();
        c.write_all(b"\n").unwrap();
    }
    c.shutdown(std::net::Shutdown::Write).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    BufReader::new(c)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

#[test]
fn socket_mode_serves_each_connection_and_removes_the_socket() {
    let dir = tempdir();
    let path = dir.path().join("s.sock");
    let srv = serve_socket(&path, &[]);
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "socket mode");
    let a = exchange(
        &path,
        &[request("a1", &["/bin/echo", "one"]), "junk".into()],
    );
    let b = exchange(&path, &[request("b1", &["/bin/echo", "two"])]);
    assert_eq!(a.len(), 2);
    assert!(
        a.iter().any(|v| v["id"] == "a1" && v["stdout"] == "one\n"),
        "{a:?}"
    );
    assert!(a
        .iter()
        .any(|v| v["id"] == Value::Null && v["error"]["field"] == "request"));
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0]["id"].clone(), b[0]["stdout"].clone()),
        (json!("b1"), json!("two\n"))
    );

    // A second server on the same path refuses to start and leaves the socket alone.
    let o = bare(Command::new(BIN).arg("serve").arg("--socket").arg(&path))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&o.stderr).contains("another server is listening"));
    assert_eq!(exchange(&path, &[request("c", &["/bin/true"])]).len(), 1);

    let (status, stderr) = srv.stop();
    assert_eq!(status, 0);
    assert_eq!(stderr, "");
    assert!(!path.exists(), "the socket is removed on exit");
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tempdir();
    let path = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a socket nobody listens on");
    let srv = serve_socket(&path, &[]);
    assert_eq!(
        exchange(&path, &[request("x", &["/bin/true"])])[0]["exit_code"],
        0
    );
    assert_eq!(srv.stop().0, 0);
}

/// The socket is 0600: another uid cannot even connect; and one that gets through the file
/// permissions is refused by its credentials (SO_PEERCRED). Both ways round: a root server
/// and an unprivileged client, an unprivileged server and a root client.
#[test]
fn peers_of_another_uid_are_refused() {
    let nobody = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        bare(&mut c)
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ])
            .args(args);
        c
    };
    let client = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", e.strerror); sys.exit(0)
try:
    s.sendall(b'{"id": "x", "argv": ["/bin/echo", "served"]}\n')
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass  # a refused peer may find the connection closed already; the answer is still there
data = b""
try:
    while chunk := s.recv(65536):
        data += chunk
except ConnectionResetError:
    pass  # a refused peer's unread request makes the close a reset, after the answer
print(data.decode().strip())
"#;
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();

    // A root server; an unprivileged client is stopped by the file mode.
    let path = dir.path().join("root.sock");
    let srv = serve_socket(&path, &[]);
    let p = path.to_str().unwrap();
    let o = nobody(&["/usr/bin/python3", "-c", client, p])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "connect: Permission denied"
    );
    // With the mode widened by hand (what the server never does), credentials stop it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = nobody(&["/usr/bin/python3", "-c", client, p])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_error(&v, Value::Null, "connection");
    // Control: the server's own uid is served.
    let v = exchange(&path, &[request("x", &["/bin/echo", "served"])]);
    assert_eq!(v[0]["stdout"], "served\n");
    let (status, stderr) = srv.stop();
    assert_eq!(status, 0);
    assert!(
        stderr.contains("refused a connection from uid 65534"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // An unprivileged server; root (which passes any file mode) is refused by credentials.
    let path = dir.path().join("nobody.sock");
    let srv = SocketServer::start(
        nobody(&[BIN, "serve", "--socket", path.to_str().unwrap()]),
        &path,
    );
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let mut c = UnixStream::connect(&path).unwrap();
    // The server may have closed already (EPIPE); its answer is readable all the same, as
    // the first line (what follows may be a reset: the request was never read).
    let _ = c.write_all(format!("{}\n", request("r", &["/bin/true"])).as_bytes());
    let mut answer = String::new();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    BufReader::new(c).read_line(&mut answer).unwrap();
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert_error(&v, Value::Null, "connection");
    // Control: uid 65534 itself is served.
    let o = nobody(&["/usr/bin/python3", "-c", client, path.to_str().unwrap()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["stdout"], "served\n", "{v}");
    let (status, stderr) = srv.stop();
    assert_eq!(status, 0);
    assert!(
        stderr.contains("refused a connection from uid 0"),
        "{stderr}"
    );
    assert!(!path.exists());
}

/// A client that goes away mid-request: its request's process is killed, the server keeps
/// serving others, and its descriptors and threads return to where they were.
#[test]
fn a_client_that_disconnects_has_its_requests_cancelled() {
    let dir = tempdir();
    let path = dir.path().join("s.sock");
    let srv = serve_socket(&path, &["--max-concurrent", "4"]);
    let pid = srv.child.id() as i32;
    // Both profiles used below start their spawner threads once: warm them up first.
    exchange(
        &path,
        &[
            request("warm", &["/bin/true"]),
            json!({"id": "warm2", "argv": ["/bin/true"], "profile": "shell"}).to_string(),
        ],
    );
    eventually("the warm-up connection's reader has ended", || {
        readers(pid) == 0
    });
    // The baseline once the warm-up's last descriptors (its cancel eventfd, its pipes) are gone:
    // the same counts twice, 200 ms apart.
    let mut last = (fds(pid), threads(pid));
    eventually("the warm-up's descriptors settle", || {
        std::thread::sleep(Duration::from_millis(200));
        let now = (fds(pid), threads(pid));
        std::mem::replace(&mut last, now) == now
    });
    let (f0, t0) = last;
    // A control connection that stays: its request keeps running meanwhile.
    let mut stay = UnixStream::connect(&path).unwrap();
    stay.write_all(json!({"id": "stay", "argv": ["/bin/bash", "-c", format!("until [ -e {0}/go ]; do sleep 0.01; done; echo stayed", dir.path().display())], "profile": "shell"}).to_string().as_bytes()).unwrap();
    stay.write_all(b"\n").unwrap();
    for round in 0..5 {
        let arg = format!("313.{round}");
        let mut c = UnixStream::connect(&path).unwrap();
        c.write_all(request("gone", &["/bin/sleep", &arg]).as_bytes())
            .unwrap();
        c.write_all(b"\n").unwrap();
        let cmd = format!("/bin/sleep {arg}");
        let mut victim = None;
        eventually("the request's sleep runs", || {
            victim = child_running(pid, &cmd);
            victim.is_some()
        });
        drop(c);
        let victim = victim.unwrap();
        eventually("the request's process is killed", || !alive(victim));
    }
    std::fs::write(dir.path().join("go"), "").unwrap();
    stay.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    stay.set_read_timeout(Some(PATIENCE)).unwrap();
    stay.read_to_string(&mut answer).unwrap();
    let v: Value = serde_json::from_str(answer.trim()).unwrap();
    assert_eq!(
        (v["id"].clone(), v["stdout"].clone()),
        (json!("stay"), json!("stayed\n"))
    );
    drop(stay);
    eventually("descriptors and threads back to where they were", || {
        readers(pid) == 0 && fds(pid) == f0 && threads(pid) == t0
    });
    assert!(children(pid).is_empty(), "no process left");
    let (status, stderr) = srv.stop();
    assert_eq!(status, 0);
    assert_eq!(stderr, "");
}

// ---- the documented example ----

#[test]
fn the_python_example_in_the_docs_runs() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/serve_example.py");
    let o = bare(&mut Command::new("/usr/bin/python3"))
        .arg(&script)
        .arg(BIN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0], "greet: exit 0: hello");
    let n = lines[1].strip_prefix("count: exit 0: ").expect(lines[1]);
    assert!(n.parse::<u32>().is_ok_and(|n| n > 0), "{out}");
    // The refused socket() failed with EPERM (Python exits 1) and is reported.
    assert_eq!(lines[2], "net: exit 1: ");
    assert!(lines[3].starts_with("  refused socket x1: "), "{out}");
}

/// A client that submits one request asking for no sandbox at all and prints every line back.
const ESCAPE_CLIENT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"id":"esc","argv":["/usr/bin/id","-u"],"profile":"unrestricted","isolation":"off","landlock":"off"}\n')
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
sys.stdout.write(data.decode())
"#;

/// The escape: a sandboxed command of the server's own uid connects to the server's socket
/// (visible in the workspace; the profile allows unix sockets) and asks for a command
/// without any sandbox.
fn escape_attempt(path: &Path, sandboxed: &[&str]) -> String {
    let mut c = Command::new(sandboxed.first().copied().unwrap_or("/usr/bin/python3"));
    c.args(sandboxed.iter().skip(1));
    if !sandboxed.is_empty() {
        c.arg("/usr/bin/python3");
    }
    let o = bare(c.arg("-c").arg(ESCAPE_CLIENT).arg(path))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_sandboxed_command_cannot_submit_requests_to_the_server() {
    // In the workspace, not below /tmp (a job's /tmp is private): visible inside the jobs.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("s.sock");
    let srv = serve_socket(&path, &[]);
    let path_s = path.to_str().unwrap();

    // Control: the same client outside any sandbox gets its unsandboxed command run.
    let out = escape_attempt(&path, &[]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["id"], "esc", "{out}");
    assert_eq!(v["exit_code"], 0, "{out}");

    // With namespaces the socket is not even reachable (the view covers host sockets outside
    // the workspace): nothing comes back.
    for v in [
        vec![BIN, "run", "--profile", "shell-network", "--"],
        vec![BIN, "run", "--profile", "unrestricted", "--"],
    ] {
        let out = escape_attempt(&path, &v);
        assert!(out.is_empty(), "{v:?}: {out}");
    }
    // Named by the caller, it is reachable, and the server itself refuses the job.
    let mut variants: Vec<Vec<&str>> = vec![
        vec![
            BIN,
            "run",
            "--profile",
            "shell-network",
            "--allow-unix-socket",
            path_s,
            "--",
        ],
        vec![
            BIN,
            "run",
            "--profile",
            "unrestricted",
            "--allow-unix-socket",
            path_s,
            "--",
        ],
    ];
    // Without namespaces the supervisor refuses the connect to a socket outside the writable
    // places unless it is named (the contained tier: docs/isolation.md); named, the request
    // cgroup marks the job (root has one on this machine).
    let out = escape_attempt(
        &path,
        &[
            BIN,
            "run",
            "--profile",
            "shell-network",
            "--isolation",
            "off",
            "--",
        ],
    );
    assert!(!out.contains("\"id\""), "contained, not named: {out}");
    if owner_of_this_process() == 0 {
        variants.push(vec![
            BIN,
            "run",
            "--profile",
            "shell-network",
            "--isolation",
            "off",
            "--allow-unix-socket",
            path_s,
            "--",
        ]);
    }
    for v in &variants {
        let out = escape_attempt(&path, v);
        assert!(
            out.contains("a sandboxed command may not submit requests")
                && !out.contains("\"stdout\""),
            "{v:?}: {out}"
        );
    }

    // A job of this very server, without namespaces: refused as one of its descendants.
    let line = json!({"id": "inner", "argv": ["/usr/bin/python3", "-c", ESCAPE_CLIENT, path_s],
        "profile": "shell-network", "isolation": "off", "allow_unix_sockets": [path_s]})
    .to_string();
    let r = exchange(&path, &[line]);
    let inner = r[0]["stdout"].as_str().unwrap_or_default();
    assert!(
        inner.contains("a sandboxed command may not submit requests"),
        "{r:?}"
    );

    let (status, stderr) = srv.stop();
    assert_eq!(status, 0);
    assert!(
        stderr.contains("refused a connection from a sandboxed command"),
        "{stderr}"
    );
}

fn owner_of_this_process() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap_or(1)
}
