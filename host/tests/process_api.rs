//! `sandbox serve --process-api` (docs/process-api.md), as a pod's agent server is used: the
//! server started as root and as uid 65534 in a bare environment, driven by a Python client
//! generated with grpcio-tools from `proto/process/v1/process.proto`, and plain HTTP for the
//! file API. Each protection has its control: the same attack without the server's
//! confinement works.
#![cfg(feature = "process-api")]

mod common;

use common::{command, As, BOTH, SANDBOX};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The target directory of this build (the binary is `<target>/<profile>/sandbox`).
fn target_dir() -> PathBuf {
    Path::new(SANDBOX)
        .parent()
        .and_then(Path::parent)
        .expect("the binary is in <target>/<profile>")
        .to_path_buf()
}

/// The Python environment with grpcio and the generated stubs: made once per target
/// directory. A failed install fails every test, saying why: the client is the test.
fn client_env() -> &'static (PathBuf, PathBuf) {
    static ENV: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    ENV.get_or_init(|| {
        let venv = target_dir().join("process-api-venv");
        let python = venv.join("bin/python");
        let run = |cmd: &mut std::process::Command, what: &str| {
            let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                out.status.success(),
                "{what} failed ({}):\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        if !python.exists() {
            run(
                std::process::Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv),
                "python3 -m venv (Debian: python3-venv)",
            );
        }
        let ready = std::process::Command::new(&python)
            .args(["-c", "import grpc, grpc_tools"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ready {
            run(
                std::process::Command::new(&python).args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "grpcio",
                    "grpcio-tools",
                ]),
                "pip install grpcio grpcio-tools (from PyPI)",
            );
        }
        let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto");
        let stubs = venv.join("stubs");
        std::fs::create_dir_all(&stubs).unwrap();
        run(
            std::process::Command::new(&python)
                .args(["-m", "grpc_tools.protoc", "-I"])
                .arg(&proto)
                .arg(format!("--python_out={}", stubs.display()))
                .arg(format!("--grpc_python_out={}", stubs.display()))
                .arg(proto.join("process/v1/process.proto")),
            "grpc_tools.protoc on proto/process/v1/process.proto",
        );
        (python, stubs)
    })
}

/// A free TCP port on 127.0.0.1 (bound and released: the server binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running server, its workspace and home; killed with SIGTERM on drop.
struct Server {
    child: Child,
    grpc: String,
    rest: String,
    ws: PathBuf,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(who: As) -> Server {
        Server::start_with(who, &[])
    }

    fn start_with(who: As, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let home = dir.path().join("home");
        for d in [&ws, &home] {
            std::fs::create_dir(d).unwrap();
            if who == As::Nobody {
                std::os::unix::fs::chown(d, Some(common::NOBODY), Some(common::NOBODY)).unwrap();
            }
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (grpc, rest) = (
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", free_port()),
        );
        let child = command(who, SANDBOX)
            .args(["serve", "--process-api", "--api-workspace"])
            .arg(&ws)
            .args(["--grpc-listen", &grpc, "--rest-listen", &rest])
            .args(extra)
            .env("HOME", &home)
            .env("SANDBOX_ZONE", "test-zone")
            .env("SANDBOX_API_TOKEN", "never-served")
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sandbox serve --process-api");
        let mut server = Server {
            child,
            grpc,
            rest,
            ws,
            home,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(20);
        while server.http("GET", "/v1/health", b"").0 != 200 {
            if let Ok(Some(status)) = server.child.try_wait() {
                let mut err = String::new();
                server
                    .child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .ok();
                panic!("the server ended ({status}): {err}");
            }
            assert!(
                Instant::now() < until,
                "the server did not answer /v1/health"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// One HTTP/1.1 request; (status, body). Status 0 when nothing answered.
    fn http(&self, method: &str, target: &str, body: &[u8]) -> (u16, String) {
        let Ok(mut s) = TcpStream::connect(&self.rest) else {
            return (0, String::new());
        };
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nContent-Type: \
             application/octet-stream\r\nConnection: close\r\n\r\n",
            self.rest,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (status, body.to_string())
    }

    /// Runs a scenario of `client.py`; its JSON answer.
    fn client(&self, scenario: &str, arg: Value) -> Value {
        let (python, stubs) = client_env();
        let out = std::process::Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/process_api/client.py"))
            .arg(stubs)
            .arg(&self.grpc)
            .arg(scenario)
            .arg(arg.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "client {scenario} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "client output: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // kill(1): no unsafe in the tests.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("the server did not stop within 10 s of SIGTERM");
    }
}

#[test]
fn execute_runs_echo_confined() {
    for who in BOTH {
        let s = Server::start(who);
        let r = s.client("execute", json!({"command": ["/bin/echo", "hello", "api"]}));
        assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
        assert_eq!(r["stdout"], "hello api\n", "{who:?}: {r}");
        assert_eq!(
            r["stderr"], "",
            "{who:?}: nothing on stderr when all is well: {r}"
        );
        assert_eq!(r["result"]["sandboxed"]["filter"], "exact", "{who:?}: {r}");
        // A relative cwd is the workspace's; variables reach the program.
        std::fs::create_dir(s.ws.join("sub")).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(s.ws.join("sub"), Some(common::NOBODY), None).unwrap();
        }
        let r = s.client(
            "execute",
            json!({"command": ["/bin/sh", "-c", "pwd; echo $GREETING; exit 3"],
                   "cwd": "sub", "env": {"GREETING": "hi"}}),
        );
        let real_ws = std::fs::canonicalize(&s.ws).unwrap();
        assert_eq!(
            r["stdout"].as_str().unwrap(),
            format!("{}/sub\nhi\n", real_ws.display()),
            "{who:?}: {r}"
        );
        assert_eq!(r["exit_code"], 3, "{who:?}: {r}");
    }
}

#[test]
fn execute_refuses_a_credential_read_and_names_it() {
    for who in BOTH {
        let s = Server::start(who);
        let secret = s.home.join(".netrc");
        std::fs::write(&secret, "machine example.com password hunter2\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&secret, Some(common::NOBODY), None).unwrap();
        }
        // Control: the same user reads it without the sandbox.
        let control = command(who, "/bin/cat").arg(&secret).output().unwrap();
        assert!(
            String::from_utf8_lossy(&control.stdout).contains("hunter2"),
            "{who:?}: the control must read the file: {control:?}"
        );
        let r = s.client(
            "execute",
            json!({"command": ["/bin/sh", "-c", format!("cat {}", secret.display())]}),
        );
        assert!(
            !r["stdout"].as_str().unwrap().contains("hunter2"),
            "{who:?}: {r}"
        );
        assert_ne!(r["exit_code"], 0, "{who:?}: {r}");
        let stderr = r["stderr"].as_str().unwrap();
        let named: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("sandbox: ") && l.contains(".netrc"))
            .collect();
        assert_eq!(named.len(), 1, "{who:?}: one line names the refusal: {r}");
        let refusals = r["result"]["refusals"].as_array().unwrap();
        assert!(
            refusals
                .iter()
                .any(|f| f["path"].as_str().is_some_and(|p| p.ends_with(".netrc"))),
            "{who:?}: {r}"
        );
    }
}

#[test]
fn execute_refuses_bad_calls_with_status_codes() {
    let s = Server::start(As::Nobody);
    let err = |arg: Value| s.client("execute", arg)["error"].clone();
    let e = err(json!({"command": ["/bin/echo", "a\u{0}b"]}));
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{e}");
    assert!(
        e["details"]
            .as_str()
            .unwrap()
            .starts_with("config.command[1]"),
        "{e}"
    );
    let e = err(json!({"command": []}));
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{e}");
    for cwd in ["/etc", "../..", "/"] {
        let e = err(json!({"command": ["/bin/true"], "cwd": cwd}));
        assert_eq!(e["code"], "PERMISSION_DENIED", "{cwd}: {e}");
        assert!(e["details"].as_str().unwrap().contains("config.cwd"), "{e}");
    }
    // A symlink in the workspace to elsewhere is elsewhere.
    std::os::unix::fs::symlink("/etc", s.ws.join("out")).unwrap();
    let e = err(json!({"command": ["/bin/true"], "cwd": "out"}));
    assert_eq!(e["code"], "PERMISSION_DENIED", "{e}");
    let e = err(json!({"command": ["/nonexistent/program"]}));
    assert_eq!(e["code"], "NOT_FOUND", "{e}");
    let e = err(json!({"command": ["/bin/true"], "env": {"LD_PRELOAD": "/tmp/x.so"}}));
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{e}");
    assert!(
        e["details"].as_str().unwrap().contains("config.env_vars"),
        "{e}"
    );
    // The server is still serving.
    assert_eq!(
        s.client("execute", json!({"command": ["/bin/true"]}))["exit_code"],
        0
    );
}

#[test]
fn files_stay_in_the_workspace() {
    for who in BOTH {
        let s = Server::start(who);
        assert_eq!(
            s.http("PUT", "/v1/files/dir/a.txt?mode=0600", b"one").0,
            204
        );
        let written = s.ws.join("dir/a.txt");
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "one");
        assert_eq!(
            std::fs::metadata(&written).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            s.http("GET", "/v1/files/dir/a.txt", b""),
            (200, "one".into())
        );
        let (code, listing) = s.http("GET", "/v1/files/dir", b"");
        assert_eq!(code, 200);
        let listing: Value = serde_json::from_str(&listing).unwrap();
        assert_eq!(listing["entries"][0]["name"], "a.txt");
        assert_eq!(listing["entries"][0]["type"], "file");
        assert_eq!(s.http("DELETE", "/v1/files/dir", b"").0, 409);
        assert_eq!(s.http("DELETE", "/v1/files/dir?recursive=true", b"").0, 204);
        assert!(!s.ws.join("dir").exists());
        assert_eq!(s.http("GET", "/v1/files/dir/a.txt", b"").0, 404);

        // Escapes: the control is the same file read directly.
        let outside = s.ws.parent().unwrap().join("outside.txt");
        std::fs::write(&outside, "secret-outside").unwrap();
        std::os::unix::fs::symlink(&outside, s.ws.join("link-file")).unwrap();
        std::os::unix::fs::symlink(s.ws.parent().unwrap(), s.ws.join("link-dir")).unwrap();
        assert!(std::fs::read_to_string(s.ws.join("link-dir/outside.txt")).is_ok());
        for (target, why) in [
            ("/v1/files/../outside.txt", "`..`"),
            ("/v1/files/a/../../outside.txt", "`..`"),
            ("/v1/files/%2E%2E%2Foutside.txt", "`..`"),
            ("/v1/files//etc/passwd", "absolute"),
            ("/v1/files/%2Fetc%2Fpasswd", "absolute"),
            ("/v1/files/link-file", "leads out"),
            ("/v1/files/link-dir/outside.txt", "leads out"),
        ] {
            for method in ["GET", "PUT", "DELETE"] {
                let (code, body) = s.http(method, target, b"overwritten");
                assert_eq!(code, 403, "{who:?} {method} {target}: {body}");
                assert!(
                    body.contains("PERMISSION_DENIED") && body.contains(why),
                    "{body}"
                );
            }
        }
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret-outside");
        // Hostile values: NUL, bad modes, unknown parameters, an empty path.
        for (method, target) in [
            ("GET", "/v1/files/a%00b"),
            ("PUT", "/v1/files/x?mode=0999"),
            ("PUT", "/v1/files/x?mode=4755"),
            ("PUT", "/v1/files/x?mode="),
            ("GET", "/v1/files/x?follow=1"),
            ("DELETE", "/v1/files/x?recursive=yes"),
        ] {
            let (code, body) = s.http(method, target, b"");
            assert_eq!(code, 400, "{method} {target}: {body}");
            assert!(body.contains("INVALID_ARGUMENT"), "{body}");
        }
        assert!(!s.ws.join("x").exists());
        let long = format!("/v1/files/{}", "a/".repeat(3000));
        assert_eq!(s.http("PUT", &long, b"").0, 400);
    }
}

#[test]
fn health_and_metadata() {
    let s = Server::start(As::Nobody);
    let (code, body) = s.http("GET", "/v1/health", b"");
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["status"],
        "ok"
    );
    let (code, body) = s.http("GET", "/v1/metadata", b"");
    assert_eq!(code, 200);
    let env: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(env["env"]["SANDBOX_ZONE"], "test-zone", "{body}");
    // Control: the token is in the server's environment, under the prefix, and not served.
    assert!(env["env"].get("SANDBOX_API_TOKEN").is_none(), "{body}");
    assert_eq!(s.http("GET", "/v1/nothing", b"").0, 404);
}

#[test]
fn options_are_checked_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--api-workspace", "relative"], "--api-workspace"),
        (&["--api-workspace", "/nonexistent/ws"], "--api-workspace"),
        (&["--api-workspace", "/"], "--api-workspace"),
        (&["--grpc-listen", "localhost"], "--grpc-listen"),
        (&["--rest-listen", ""], "--rest-listen"),
        (&["--metadata-env-prefix", ""], "--metadata-env-prefix"),
        (&["--metadata-env-prefix", "A\nB"], "--metadata-env-prefix"),
        (&["--api-profile", "no-such-profile"], "profile"),
    ];
    for (args, named) in cases {
        let mut cmd = command(As::Nobody, SANDBOX);
        cmd.args(["serve", "--process-api"]);
        if !args.contains(&"--api-workspace") {
            cmd.arg("--api-workspace").arg(dir.path());
        }
        let out = cmd.args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert!(
            err.contains(named) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    // The API's options without --process-api are refused, not ignored.
    let out = command(As::Nobody, SANDBOX)
        .args(["serve", "--api-profile", "shell"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--process-api"));
}

#[test]
fn start_streams_output_as_it_comes() {
    for who in BOTH {
        let s = Server::start(who);
        let r = s.client(
            "start",
            json!({"command": ["/bin/sh", "-c",
                "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo oops >&2; exit 7"]}),
        );
        assert!(r["error"].is_null(), "{who:?}: {r}");
        let events = r["events"].as_array().unwrap();
        assert_eq!(events[0]["kind"], "init", "{who:?}: {r}");
        assert!(events[0]["id"].as_i64().unwrap() > 0);
        let at = |text: &str| {
            events
                .iter()
                .find(|e| e["data"].as_str().is_some_and(|d| d.contains(text)))
                .unwrap_or_else(|| panic!("{who:?}: no {text}: {r}"))["t"]
                .as_f64()
                .unwrap()
        };
        // Streamed: the first line arrives well before the last (0.8 s of sleeps apart).
        assert!(at("line3") - at("line1") > 0.5, "{who:?}: {r}");
        assert!(events
            .iter()
            .any(|e| e["kind"] == "stderr" && e["data"].as_str().unwrap().contains("oops")));
        let last = events.last().unwrap();
        assert_eq!(
            (&last["kind"], &last["code"]),
            (&json!("exit"), &json!(7)),
            "{r}"
        );
    }
}

#[test]
fn write_stdin_reaches_the_process() {
    for who in BOTH {
        let s = Server::start(who);
        let r = s.client(
            "stdin",
            json!({"command": ["/bin/cat"], "input": "hello stdin\n", "expect": "hello stdin"}),
        );
        assert_eq!(r["write"], "ok", "{who:?}: {r}");
        assert_eq!(r["echoed"], true, "{who:?}: {r}");
        assert_eq!(r["eof"], "ok", "{who:?}: {r}");
        let last = r["events"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["code"], 0, "{who:?}: cat ends at eof: {r}");
        // python3 -i answers over stdin too.
        let r = s.client(
            "stdin",
            json!({"command": ["/usr/bin/python3", "-i", "-q"], "input": "print(6*7)\n",
                   "expect": "42"}),
        );
        assert_eq!(r["echoed"], true, "{who:?}: {r}");
    }
}

#[test]
fn send_signal_interrupts_sleep() {
    for who in BOTH {
        let s = Server::start(who);
        let r = s.client(
            "signal",
            json!({"command": ["/bin/sleep", "30"], "signal": 2, "bad": 99}),
        );
        assert_eq!(r["bad_signal"]["code"], "INVALID_ARGUMENT", "{who:?}: {r}");
        assert_eq!(r["signal"], "ok", "{who:?}: {r}");
        assert!(r["seconds_to_exit"].as_f64().unwrap() < 5.0, "{who:?}: {r}");
        let last = r["events"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["code"], 128 + 2, "{who:?}: ended by SIGINT: {r}");
        assert_eq!(r["after_exit"]["code"], "NOT_FOUND", "{who:?}: {r}");
    }
}

#[test]
fn calls_on_unknown_processes_are_not_found() {
    let s = Server::start(As::Nobody);
    for id in [0, 1, -1, i32::MAX] {
        let r = s.client("unknown", json!({"id": id}));
        for call in ["write", "eof", "signal", "resize"] {
            assert_eq!(r[call]["code"], "NOT_FOUND", "{id} {call}: {r}");
            assert!(
                r[call]["details"].as_str().unwrap().contains("process_id"),
                "{r}"
            );
        }
        assert_eq!(r["no_payload"]["code"], "INVALID_ARGUMENT", "{r}");
    }
}

#[test]
fn huge_writes_are_refused_and_the_process_goes_on() {
    let s = Server::start(As::Nobody);
    let r = s.client("huge", json!({"command": ["/bin/cat"], "bytes": 16 << 20}));
    // tonic's limit on a received message (4 MiB): OUT_OF_RANGE, naming the size.
    assert_eq!(r["huge"]["code"], "OUT_OF_RANGE", "{r}");
    assert_eq!(r["small_after"], "ok", "{r}");
    assert_eq!(r["echoed"], true, "{r}");
}

#[test]
fn resize_needs_a_terminal() {
    let s = Server::start(As::Nobody);
    let r = s.client("no_tty", json!({"command": ["/bin/sleep", "30"]}));
    assert_eq!(r["resize"]["code"], "FAILED_PRECONDITION", "{r}");
}

#[test]
fn resize_tty_changes_the_terminal_size() {
    for who in BOTH {
        let s = Server::start(who);
        // `stty size` reads the terminal of its stdin: 24 80 at start, 40 100 after ResizeTTY.
        let r = s.client(
            "tty",
            json!({"command": ["/bin/sh", "-c", "stty size; read x; stty size"]}),
        );
        assert_eq!(r["first"], true, "{who:?}: {r}");
        assert_eq!(r["bad_size"]["code"], "INVALID_ARGUMENT", "{who:?}: {r}");
        assert_eq!(r["resize"], "ok", "{who:?}: {r}");
        assert_eq!(r["second"], true, "{who:?}: {r}");
        let last = r["events"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["code"], 0, "{who:?}: {r}");
    }
}

#[test]
fn start_refuses_a_credential_read_and_names_it() {
    for who in BOTH {
        let s = Server::start(who);
        let secret = s.home.join(".netrc");
        std::fs::write(&secret, "machine example.com password hunter2\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&secret, Some(common::NOBODY), None).unwrap();
        }
        // Control: the same user reads it without the sandbox.
        let control = command(who, "/bin/cat").arg(&secret).output().unwrap();
        assert!(String::from_utf8_lossy(&control.stdout).contains("hunter2"));
        let r = s.client(
            "start",
            json!({"command": ["/bin/cat", secret.to_string_lossy()]}),
        );
        let events = r["events"].as_array().unwrap();
        let text = |kind: &str| -> String {
            events
                .iter()
                .filter(|e| e["kind"] == kind)
                .map(|e| e["data"].as_str().unwrap().to_string())
                .collect()
        };
        assert!(!text("stdout").contains("hunter2"), "{who:?}: {r}");
        assert!(text("stderr").contains("Permission denied"), "{who:?}: {r}");
        assert_ne!(events.last().unwrap()["code"], 0, "{who:?}: {r}");
        let named = text("stderr")
            .lines()
            .filter(|l| l.starts_with("sandbox: ") && l.contains(".netrc"))
            .count();
        assert_eq!(named, 1, "{who:?}: one line names the refusal: {r}");
    }
}

#[test]
fn start_lives_until_its_deadline_not_the_policy_timeout() {
    for who in BOTH {
        let policy = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(policy.path(), r#"{"timeout_s": 2}"#).unwrap();
        std::fs::set_permissions(policy.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let file = policy.path().display().to_string();
        let s = Server::start_with(who, &["--api-policy", &file, "--api-profile", "shell"]);
        let marker = format!("654.{}", who as u8 + 1);
        let r = s.client(
            "lifetime",
            json!({
                "command": ["/bin/sh", "-c", "sleep 4; echo alive"],
                "sleep": ["/bin/sleep", marker],
                "deadline": 1.5,
            }),
        );
        // The control: the policy's 2 s end an `Execute` of the same command.
        let e = &r["execute"];
        assert_ne!(e["exit_code"], 0, "{who:?}: {r}");
        assert!(
            !e["stdout"].as_str().unwrap().contains("alive"),
            "{who:?}: {r}"
        );
        // `Start` without a deadline outlives them.
        let events = r["start"]["events"].as_array().unwrap();
        assert!(
            events.iter().any(|e| e["data"] == "alive\n"),
            "{who:?}: {r}"
        );
        assert_eq!(events.last().unwrap()["code"], 0, "{who:?}: {r}");
        // With a deadline, the process (silent, so no failed send ends it) is ended by it.
        assert_eq!(r["running"], 1, "{who:?}: {r}");
        assert_eq!(
            r["start_deadline"]["error"]["code"], "DEADLINE_EXCEEDED",
            "{who:?}: {r}"
        );
        assert_eq!(
            r["left"], 0,
            "{who:?}: the sleep outlived its deadline: {r}"
        );
        assert!(r["gone_after_s"].as_f64().unwrap() < 3.0, "{who:?}: {r}");
    }
}
