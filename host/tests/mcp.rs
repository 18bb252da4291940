//! `sandbox mcp` driven by the official MCP Python SDK (PyPI `mcp`, installed once into a
//! venv under the target directory: PyPI must be reachable, as `.ci/run`'s installs need;
//! when it is not, every SDK test fails saying so), by raw JSON-RPC lines for the protocol's
//! errors, and `sandbox run` as the launcher of a stdio MCP server written with the SDK.
//! As root and as uid 65534; each refusal has its control.

mod common;

use common::{command, As, BOTH, NOBODY, SANDBOX};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The SDK release the tests install; `SANDBOX_TEST_MCP_SDK` names another (`mcp<2`).
const SDK: &str = "mcp==2.3.0";

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_py")
}

/// The venv's python, the SDK installed in it once per target directory.
fn sdk_python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let spec = std::env::var("SANDBOX_TEST_MCP_SDK").unwrap_or_else(|_| SDK.to_string());
        let name: String = spec
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-sdk-{name}"));
        let python = venv.join("bin/python");
        let done = venv.join(".installed");
        if done.exists() {
            return python;
        }
        let _ = std::fs::remove_dir_all(&venv);
        let run = |cmd: &mut Command, what: &str| {
            let o = cmd
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                o.status.success(),
                "INSTALLING THE MCP PYTHON SDK FAILED ({what}: {}); these tests need PyPI \
                 (pip install {spec}) and python3-venv (.ci/run installs it):\n{}{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        };
        run(
            // Debian's python (the one `.ci/run` installs python3-venv for), which uid 65534
            // can run: not whatever `python3` the caller's PATH finds first.
            Command::new("/usr/bin/python3")
                .args(["-m", "venv"])
                .arg(&venv),
            "/usr/bin/python3 -m venv",
        );
        run(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                &spec,
            ]),
            "pip install",
        );
        std::fs::write(&done, &spec).unwrap();
        python
    })
}

/// A home directory for `who` (owned by it, so that uid 65534's server and commands can use
/// it) holding a credential, `.ssh/id_rsa`, a plain file, `notes.txt`, and `project/`, the
/// servers' working directory (a home is no workspace).
struct Home {
    dir: tempfile::TempDir,
}

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- secret-key-material";

impl Home {
    fn new(who: As) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".ssh")).unwrap();
        std::fs::write(dir.path().join(".ssh/id_rsa"), KEY).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "plain notes\n").unwrap();
        std::fs::create_dir(dir.path().join("project")).unwrap();
        if who == As::Nobody {
            for p in [".", ".ssh", ".ssh/id_rsa", "notes.txt", "project"] {
                std::os::unix::fs::chown(dir.path().join(p), Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        Home { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn project(&self) -> PathBuf {
        self.path().join("project")
    }
    fn key(&self) -> String {
        self.path().join(".ssh/id_rsa").display().to_string()
    }
}

/// The command line that starts `program args` as `who` (uid 65534 through setpriv).
fn as_who(who: As, program: &str, args: &[String]) -> (String, Vec<String>) {
    match who {
        As::Root => (program.to_string(), args.to_vec()),
        As::Nobody => (
            "setpriv".to_string(),
            [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                program,
            ]
            .iter()
            .map(|s| s.to_string())
            .chain(args.iter().cloned())
            .collect(),
        ),
    }
}

/// Runs the SDK client against `program args` started as `who` with a bare environment
/// (HOME `home`), making `calls`; returns its JSON report.
fn sdk(who: As, home: &Path, program: &str, args: &[String], calls: Value) -> Value {
    let (command_, args) = as_who(who, program, args);
    let cfg = json!({
        "command": command_,
        "args": args,
        "env": {"PATH": common::PATH, "HOME": home, "LANG": "C.UTF-8"},
        "calls": calls,
    });
    // The configuration goes in a file: a huge argv would not fit in the client's own.
    let cfg_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(cfg_file.path(), cfg.to_string()).unwrap();
    let o = command(As::Root, sdk_python())
        .arg(scripts().join("sdk_client.py"))
        .arg(cfg_file.path())
        .current_dir(home.join("project"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{who:?} sdk client: {}\n{stdout}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{who:?}: {e}: {stdout}"))
}

/// `sandbox mcp FLAGS` run as `who` by the SDK client, making `calls`.
fn mcp(who: As, home: &Path, flags: &[&str], calls: Value) -> Value {
    let mut args = vec!["mcp".to_string()];
    args.extend(flags.iter().map(|s| s.to_string()));
    sdk(who, home, SANDBOX, &args, calls)
}

/// The text content of a call's result.
fn text(call: &Value) -> &str {
    call["content"][0]["text"].as_str().unwrap_or_default()
}

fn is_error(call: &Value) -> bool {
    call["isError"] == json!(true)
}

#[test]
fn the_sdk_lists_the_tools_and_negotiates_a_version() {
    for who in BOTH {
        let home = Home::new(who);
        let out = mcp(who, home.path(), &["--timeout", "30"], json!([]));
        let version = out["initialize"]["protocolVersion"].as_str().unwrap();
        assert!(
            sandbox_host::mcp::PROTOCOL_VERSIONS.contains(&version),
            "{who:?}: {out}"
        );
        assert_eq!(out["initialize"]["serverInfo"]["name"], "sandbox");
        let tools = out["tools"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "run",
                "shell",
                "start",
                "read_output",
                "write_stdin",
                "signal",
                "list",
                "session_end"
            ],
            "{who:?}"
        );
        for t in tools {
            assert_eq!(t["inputSchema"]["additionalProperties"], false, "{t}");
            assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        }
        assert_eq!(tools[0]["inputSchema"]["required"], json!(["argv"]));
        assert_eq!(tools[1]["inputSchema"]["required"], json!(["command"]));
        assert_eq!(
            tools[0]["inputSchema"]["properties"]["timeout_s"]["maximum"],
            30.0
        );
        assert_eq!(tools[0]["outputSchema"]["type"], "object", "{who:?}");
        assert!(text(&json!({})).is_empty());
    }
}

#[test]
fn a_call_that_succeeds() {
    for who in BOTH {
        let home = Home::new(who);
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell"],
            json!([
                {"tool": "run", "arguments": {"argv": ["/bin/echo", "hello", "$HOME;|"]}},
                {"tool": "shell", "arguments": {"command": "echo a | tr a b; echo err >&2"}},
                {"tool": "shell", "arguments": {"command": "cat; exit 3", "stdin": "from stdin"}},
            ]),
        );
        let calls = out["calls"].as_array().unwrap();
        // No shell for `run`: `$HOME;|` reaches echo as it is.
        assert!(!is_error(&calls[0]), "{who:?}: {}", calls[0]);
        assert_eq!(
            text(&calls[0]),
            "exit status 0\n--- stdout ---\nhello $HOME;|\n"
        );
        let s = &calls[0]["structuredContent"];
        assert_eq!(s["exit_code"], 0, "{who:?}: {s}");
        assert_eq!(s["stdout"], "hello $HOME;|\n");
        assert_eq!(s["sandboxed"]["profile"], "shell");
        assert_eq!(
            text(&calls[1]),
            "exit status 0\n--- stdout ---\nb\n--- stderr ---\nerr\n",
            "{who:?}"
        );
        // A program that fails is a tool error, with its status and output.
        assert!(is_error(&calls[2]), "{who:?}: {}", calls[2]);
        assert_eq!(
            text(&calls[2]),
            "exit status 3\n--- stdout ---\nfrom stdin\n"
        );
        assert_eq!(calls[2]["structuredContent"]["exit_code"], 3);
    }
}

#[test]
fn a_socket_under_minimal_is_refused_and_named() {
    let py = "import socket; socket.socket(); print('socket made')";
    for who in BOTH {
        let home = Home::new(who);
        // Control: the same program, unconfined, makes its socket.
        let o = command(who, "/usr/bin/python3")
            .args(["-c", py])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "socket made\n",
            "{who:?}"
        );
        let out = mcp(
            who,
            home.path(),
            &["--profile", "minimal"],
            json!([{"tool": "run", "arguments": {"argv": ["/usr/bin/python3", "-c", py]}}]),
        );
        let call = &out["calls"][0];
        assert!(is_error(call), "{who:?}: {call}");
        let t = text(call);
        assert!(t.starts_with("exit status 1\n"), "{who:?}: {t}");
        assert!(!t.contains("socket made"), "{who:?}: {t}");
        assert!(
            t.contains("--- sandbox ---\nsandbox: /usr/bin/python3")
                && t.contains("was refused socket (41): socket is not allowed by profile minimal"),
            "{who:?}: {t}"
        );
        let v = &call["structuredContent"]["violations"][0];
        assert_eq!(v["syscall"], "socket", "{who:?}: {call}");
        // The change is a flag of the server's command line: no call can make it.
        assert!(v["change"].as_str().unwrap().starts_with("--"), "{v}");
    }
}

#[test]
fn a_credential_read_is_refused_and_named() {
    for who in BOTH {
        let home = Home::new(who);
        let line = format!("cat {}", home.key());
        // Control: an unconfined sh, as the same user with the same HOME, reads the key.
        let o = command(who, "sh")
            .args(["-c", &line])
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), KEY, "{who:?}");
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell"],
            json!([
                {"tool": "shell", "arguments": {"command": line}},
                {"tool": "run", "arguments": {"argv": ["/bin/cat", home.path().join("notes.txt")]}},
            ]),
        );
        let call = &out["calls"][0];
        assert!(is_error(call), "{who:?}: {call}");
        let t = text(call);
        assert!(!t.contains("secret-key-material"), "{who:?}: {t}");
        assert!(t.contains("Permission denied"), "{who:?}: {t}");
        assert!(
            t.contains("--- sandbox ---\nsandbox: ") && t.contains(".ssh"),
            "{who:?}: the refusal is named: {t}"
        );
        let r = &call["structuredContent"]["refusals"][0];
        assert!(
            r["path"].as_str().unwrap().ends_with(".ssh/id_rsa"),
            "{who:?}: {call}"
        );
        // The rest of the home stays readable.
        assert_eq!(
            text(&out["calls"][1]),
            "exit status 0\n--- stdout ---\nplain notes\n"
        );
    }
}

#[test]
fn a_call_that_times_out_is_killed_and_said() {
    for who in BOTH {
        let home = Home::new(who);
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell", "--timeout", "20"],
            json!([{"tool": "shell", "arguments": {"command": "echo started; sleep 60", "timeout_s": 1}}]),
        );
        let call = &out["calls"][0];
        let took = call["structuredContent"]["duration_s"].as_f64().unwrap();
        assert!(took < 10.0, "{who:?}: {took} s");
        assert!(is_error(call), "{who:?}: {call}");
        let t = text(call);
        assert!(
            t.starts_with("timed out after 1 s: the program and every process it started were killed\n--- stdout ---\nstarted\n"),
            "{who:?}: {t}"
        );
        assert!(
            t.contains("sandbox: /bin/sh timed out after 1 s")
                && t.contains("a call may ask for up to the server's --timeout"),
            "{who:?}: {t}"
        );
        assert_eq!(call["structuredContent"]["timed_out"], true);
        // A program that waits for what a refused call would have given: the timeout line
        // says the refusal came first, not to ask for more time.
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell", "--timeout", "20"],
            json!([{"tool": "shell", "arguments": {
                "command": "python3 -c 'import socket, time\ntry: socket.socket()\nexcept OSError: pass\ntime.sleep(60)'",
                "timeout_s": 1}}]),
        );
        let t = text(&out["calls"][0]);
        assert!(
            t.contains("timed out after 1 s; it and every process it started were killed; it had been refused socket"),
            "{who:?}: {t}"
        );
    }
}

#[test]
fn bad_input_is_refused_and_runs_nothing() {
    for who in BOTH {
        let home = Home::new(who);
        let marker = home.project().join("ran");
        let touch = format!("touch {}", marker.display());
        let many: Vec<String> = std::iter::once("/bin/true".to_string())
            .chain((0..5000).map(|i| i.to_string()))
            .collect();
        let long = "x".repeat(1024 * 1024 + 1);
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell", "--timeout", "10"],
            json!([
                {"tool": "run", "arguments": {"argv": "/bin/true"}},
                {"tool": "run", "arguments": {"argv": []}},
                {"tool": "run", "arguments": {"argv": ["/bin/echo", 7]}},
                {"tool": "run", "arguments": {}},
                {"tool": "run", "arguments": {"argv": ["/bin/echo", "a\u{0}b"]}},
                {"tool": "shell", "arguments": {"command": format!("{touch}\u{0}")}},
                {"tool": "run", "arguments": {"argv": many}},
                {"tool": "run", "arguments": {"argv": ["/bin/echo", long]}},
                {"tool": "shell", "arguments": {"command": touch, "timeout_s": "5"}},
                {"tool": "shell", "arguments": {"command": touch, "timeout_s": 11}},
                {"tool": "shell", "arguments": {"command": touch, "profile": "unrestricted"}},
                {"tool": "shell", "arguments": {"command": touch, "env": {"LD_PRELOAD": "/x.so"}}},
                {"tool": "run", "arguments": {"argv": ["relative/prog"]}},
                {"tool": "run", "arguments": {"argv": ["/no/such/program"]}},
                {"tool": "exec", "arguments": {"argv": ["/bin/true"]}},
            ]),
        );
        let calls = out["calls"].as_array().unwrap();
        let want = [
            "sandbox: refused: argv: must be a non-empty list of strings",
            "sandbox: refused: argv: must be a non-empty list of strings",
            "sandbox: refused: argv[1]: must be a string",
            "sandbox: refused: argv: missing",
            "sandbox: refused: argv[1]: must not contain NUL",
            "sandbox: refused: command: must not contain NUL",
            "sandbox: refused: argv: 5001 arguments; at most 4096",
            "sandbox: refused: argv: more than 1048576 bytes in all",
            "sandbox: refused: timeout_s: must be a number of seconds",
            "sandbox: refused: timeout_s: must be between 1 and 10 seconds (the server's --timeout), got 11",
            "sandbox: refused: unknown argument `profile`: the tool takes command, stdin and timeout_s; the policy",
            "sandbox: refused: unknown argument `env`:",
            "sandbox: refused: argv[0]: ",
            "sandbox: refused: argv[0]: ",
        ];
        for (i, w) in want.iter().enumerate() {
            assert!(is_error(&calls[i]), "{who:?} call {i}: {}", calls[i]);
            assert!(
                text(&calls[i]).starts_with(w),
                "{who:?} call {i}: {}",
                calls[i]
            );
            assert!(
                calls[i].get("structuredContent").is_none(),
                "{who:?} call {i}"
            );
        }
        assert!(
            text(&calls[13]).ends_with("\nexit status 127"),
            "{}",
            calls[13]
        );
        // An unknown tool is a protocol error (invalid params), which the SDK raises.
        assert_eq!(calls[14]["code"], -32602, "{who:?}: {}", calls[14]);
        assert!(calls[14]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool `exec`"));
        assert!(!marker.exists(), "{who:?}: a refused call ran");
    }
    // Control: the same `touch` through the same server does run when the call is valid.
    let who = As::Root;
    let home = Home::new(who);
    let marker = home.project().join("ran");
    let out = mcp(
        who,
        home.path(),
        &["--profile", "shell"],
        json!([{"tool": "shell", "arguments": {"command": format!("touch {}", marker.display())}}]),
    );
    assert!(!is_error(&out["calls"][0]), "{}", out["calls"][0]);
    assert!(marker.exists());
}

/// `sandbox mcp` fed raw lines (all at once, stdin then closed): the replies, one JSON
/// object per line, and stderr.
fn raw(who: As, flags: &[&str], input: &str) -> (Vec<Value>, String) {
    let home = Home::new(who);
    let o = common::output_with_input(
        common::sandbox(who)
            .arg("mcp")
            .args(flags)
            .env("HOME", home.path())
            .current_dir(home.project())
            .stderr(Stdio::piped()),
        input.as_bytes(),
    );
    assert!(o.status.success(), "{who:?}: {}", o.status);
    let replies = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    (replies, String::from_utf8_lossy(&o.stderr).into_owned())
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[test]
fn raw_protocol_errors() {
    let huge = format!("{{\"x\":\"{}\"}}", "y".repeat(9 * 1024 * 1024));
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        INIT,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "{not json",
        r#"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
        r#"{"id":3,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#,
        r#"{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":["/bin/true"]}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        huge.as_str(),
        "",
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":"s","result":{}}"#,
        INIT,
        r#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#,
    ];
    for who in BOTH {
        let (replies, stderr) = raw(who, &[], &(lines.join("\n") + "\n"));
        // Tool calls are answered from threads of their own, as they end: the calls (7 and 8)
        // are put back in the order they were sent for the comparison; the rest are answered
        // by the reader, in order.
        let mut replies = replies;
        let calls: Vec<Value> = replies
            .iter()
            .filter(|r| r["id"] == json!(7) || r["id"] == json!(8))
            .cloned()
            .collect();
        replies.retain(|r| r["id"] != json!(7) && r["id"] != json!(8));
        let mut calls = calls;
        calls.sort_by_key(|r| r["id"].as_i64());
        let at = replies
            .iter()
            .position(|r| r["id"] == json!(9))
            .unwrap_or(0);
        replies.splice(at..at, calls);
        let got: Vec<(Value, Value)> = replies
            .iter()
            .map(|r| (r["id"].clone(), r["error"]["code"].clone()))
            .collect();
        assert_eq!(
            got,
            [
                (json!(1), json!(-32600)),    // before initialize
                (json!(0), Value::Null),      // initialize
                (Value::Null, json!(-32700)), // not JSON
                (Value::Null, json!(-32600)), // a batch
                (json!(3), json!(-32600)),    // no jsonrpc
                (json!(4), json!(-32601)),    // unknown method
                (Value::Null, json!(-32700)), // duplicate key
                (json!(7), json!(-32602)),    // arguments not an object
                (json!(8), json!(-32602)),    // no name
                (json!(9), json!(-32602)),    // params not an object
                (Value::Null, json!(-32600)), // id null
                (Value::Null, json!(-32600)), // too long
                (json!(0), json!(-32600)),    // initialize again
                (json!("last"), Value::Null), // ping still answered
            ],
            "{who:?}: {replies:?}"
        );
        assert!(replies[11]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"));
        assert_eq!(replies[13]["result"], json!({}));
        assert!(
            stderr.is_empty(),
            "{who:?}: nothing on stderr when all is well: {stderr}"
        );
    }
}

#[test]
fn raw_version_negotiation() {
    let init = |v: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{v}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        ) + "\n"
            + r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
            + "\n"
            + r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"argv":["/bin/true"]}}}"#
            + "\n"
    };
    for (asked, answered, structured) in [
        ("2025-11-25", "2025-11-25", true),
        ("2025-06-18", "2025-06-18", true),
        ("2025-03-26", "2025-03-26", false),
        ("2024-11-05", "2024-11-05", false),
        ("1999-01-01", "2025-11-25", true),
    ] {
        let (r, stderr) = raw(As::Root, &[], &init(asked));
        assert_eq!(r[0]["result"]["protocolVersion"], answered, "{asked}");
        assert_eq!(
            r[1]["result"]["tools"][0].get("outputSchema").is_some(),
            structured,
            "{asked}"
        );
        assert_eq!(
            r[2]["result"].get("structuredContent").is_some(),
            structured,
            "{asked}"
        );
        assert_eq!(r[2]["result"]["isError"], false, "{asked}: {}", r[2]);
        assert!(stderr.is_empty(), "{stderr}");
    }
    let (r, _) = raw(
        As::Root,
        &[],
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":5}}\n",
    );
    assert_eq!(r[0]["error"]["code"], -32602);
}

/// Bad flags: one stderr line naming the flag, exit 125, nothing on stdout, no server.
#[test]
fn bad_flags_refuse_to_start() {
    let cases: &[(&[&str], &str)] = &[
        (&["--timeout", "0"], "sandbox: mcp: --timeout: "),
        (&["--timeout", "86401"], "sandbox: mcp: --timeout: "),
        (&["--memory", "1"], "sandbox: mcp: --memory: "),
        (
            &["--profile", "no-such-profile"],
            "sandbox: mcp: --profile: ",
        ),
        (&["--profile", ""], "sandbox: mcp: --profile: "),
        (
            &["--workspace", "relative/dir"],
            "sandbox: mcp: --workspace: ",
        ),
        (&["--workspace", "/tmp/a\nb"], "sandbox: mcp: --workspace: "),
        (
            &["--profile", "shell", "--workspace", "/"],
            "sandbox: mcp: --workspace: ",
        ),
        (&["--allow-write", ""], "sandbox: mcp: --allow-write: "),
        (&["--deny-read", "rel"], "sandbox: mcp: --deny-read: "),
        (
            &["--env", "LD_PRELOAD=/x.so"],
            "sandbox: mcp: --env `LD_PRELOAD`: ",
        ),
        (&["--env", "=x"], "sandbox: mcp: --env ``: "),
        (
            &["--allow-domain", "bad domain"],
            "sandbox: mcp: --allow-domain: ",
        ),
        (&["--config", "/etc/passwd"], "sandbox: mcp: --config: "),
        (
            &["--on-violation", "log"],
            "sandbox: mcp: --on-violation log: ",
        ),
    ];
    for who in BOTH {
        for (flags, want) in cases {
            let o = common::sandbox(who)
                .arg("mcp")
                .args(*flags)
                .current_dir("/tmp")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(125), "{who:?} {flags:?}: {stderr}");
            assert!(o.stdout.is_empty(), "{who:?} {flags:?}");
            assert_eq!(stderr.lines().count(), 1, "{who:?} {flags:?}: {stderr}");
            assert!(stderr.starts_with(want), "{who:?} {flags:?}: {stderr}");
        }
    }
}

/// A stdio MCP server written with the SDK, launched through `sandbox run`: its tool's read
/// of a credential is refused; the same server launched directly reads it (the control).
#[test]
fn sandbox_run_launches_an_sdk_server_confined() {
    let server = scripts().join("reader_server.py").display().to_string();
    let python = sdk_python().display().to_string();
    for who in BOTH {
        let home = Home::new(who);
        let calls = json!([
            {"tool": "read_file", "arguments": {"path": home.key()}},
            {"tool": "read_file", "arguments": {"path": home.path().join("notes.txt")}},
        ]);
        let direct = sdk(
            who,
            home.path(),
            &python,
            std::slice::from_ref(&server),
            calls.clone(),
        );
        assert!(
            text(&direct["calls"][0]).contains("secret-key-material"),
            "{who:?}: {direct}"
        );
        let args: Vec<String> = ["run", "--profile", "minimal", "--", &python, &server]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let confined = sdk(who, home.path(), SANDBOX, &args, calls);
        let names: Vec<&str> = confined["tools"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["read_file"], "{who:?}");
        let refused = &confined["calls"][0];
        assert!(is_error(refused), "{who:?}: {refused}");
        assert!(
            !refused.to_string().contains("secret-key-material"),
            "{who:?}: {refused}"
        );
        assert!(
            text(&confined["calls"][1]).contains("plain notes"),
            "{who:?}: {confined}"
        );
    }
}

/// `sandbox run` passes a stdio server's streams through: stdin is read as it arrives (one
/// request answered before the next is written), and stdout holds the server's lines alone.
#[test]
fn sandbox_run_passes_stdio_through() {
    let server = scripts().join("reader_server.py").display().to_string();
    let python = sdk_python().display().to_string();
    for who in BOTH {
        let home = Home::new(who);
        let mut child = common::sandbox(who)
            .args(["run", "--profile", "minimal", "--", &python, &server])
            .env("HOME", home.path())
            .current_dir(home.project())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let _ = tx.send(line.unwrap_or_default());
            }
        });
        let mut send = |line: &str| {
            writeln!(stdin, "{line}").unwrap();
            stdin.flush().unwrap();
        };
        let reply = |line: &str| -> Value {
            let reply = rx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("{who:?}: no reply to {line}: {e}"));
            serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{who:?}: {e}: {reply}"))
        };
        send(INIT);
        let init = reply(INIT);
        assert_eq!(init["id"], 0, "{who:?}: {init}");
        assert!(
            init["result"]["protocolVersion"].is_string(),
            "{who:?}: {init}"
        );
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let list_line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        send(list_line);
        let list = reply(list_line);
        assert_eq!(
            list["result"]["tools"][0]["name"], "read_file",
            "{who:?}: {list}"
        );
        drop(stdin);
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{who:?}: {}", o.status);
        // Nothing of the sandbox's own followed on stdout either.
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_err(), "{who:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("sandbox:"), "{who:?}: {stderr}");
    }
}

/// The policy of the session tests: sockets, and a network namespace of the session's own
/// (`--network none`), so that a server and its client meet on the session's loopback only.
const SESSION_FLAGS: [&str; 6] = [
    "--profile",
    "shell-network",
    "--network",
    "none",
    "--timeout",
    "30",
];

/// A shell line that fetches `url` with curl, trying for up to 5 s (the server may still be
/// starting); its status is curl's last.
fn curl_retrying(url: &str) -> String {
    format!(
        "for i in $(seq 50); do curl -sS -o /dev/null -w '%{{http_code}}' {url} && exit 0; \
         sleep 0.1; done; exit 7"
    )
}

#[test]
fn session_tools_keep_a_server_that_run_reaches() {
    for who in BOTH {
        let home = Home::new(who);
        let url = "http://127.0.0.1:8765/";
        let out = mcp(
            who,
            home.path(),
            &SESSION_FLAGS,
            json!([
                // Control: without a session, a server started by one call is gone for the next.
                {"tool": "shell", "arguments": {"command": "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1"}},
                {"tool": "shell", "arguments": {"command": curl_retrying(url), "timeout_s": 10}},
                {"tool": "start", "arguments": {"argv": ["python3", "-u", "-m", "http.server", "8765", "--bind", "127.0.0.1"], "wait_s": 5}},
                {"tool": "shell", "arguments": {"command": curl_retrying(url), "timeout_s": 10}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                {"tool": "list", "arguments": {}},
                {"tool": "session_end", "arguments": {}},
                // After the session: run is on its own again.
                {"tool": "run", "arguments": {"argv": ["curl", "-sS", "-o", "/dev/null", url]}},
                {"tool": "list", "arguments": {}},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        assert!(
            is_error(&c[1]),
            "{who:?}: the control reached a server: {}",
            c[1]
        );
        assert_eq!(
            c[1]["structuredContent"]["exit_code"], 7,
            "{who:?}: {}",
            c[1]
        );
        assert!(!is_error(&c[2]), "{who:?}: {}", c[2]);
        let started = &c[2]["structuredContent"];
        assert_eq!(started["running"], true, "{who:?}: {started}");
        assert!(
            started["stdout"]
                .as_str()
                .unwrap()
                .starts_with("Serving HTTP on 127.0.0.1 port 8765"),
            "{who:?}: {started}"
        );
        assert!(!is_error(&c[3]), "{who:?}: {}", c[3]);
        assert_eq!(c[3]["structuredContent"]["stdout"], "200", "{who:?}");
        // The server logged the request on its stderr, which the next read gives.
        let log = &c[4]["structuredContent"];
        assert!(
            log["stderr"]
                .as_str()
                .unwrap()
                .contains("\"GET / HTTP/1.1\" 200"),
            "{who:?}: {log}"
        );
        assert_eq!(log["running"], true);
        let listed = &c[5]["structuredContent"];
        assert_eq!(listed["session"], true, "{who:?}: {listed}");
        assert_eq!(listed["processes"].as_array().unwrap().len(), 1);
        assert_eq!(listed["processes"][0]["command"][3], "http.server");
        assert_eq!(
            c[6]["structuredContent"],
            json!({"ended": true, "processes": 1}),
            "{who:?}"
        );
        assert_eq!(
            c[7]["structuredContent"]["exit_code"], 7,
            "{who:?}: {}",
            c[7]
        );
        assert_eq!(
            c[8]["structuredContent"],
            json!({"session": false, "processes": []})
        );
    }
}

#[test]
fn session_tools_write_stdin_and_signal() {
    for who in BOTH {
        let home = Home::new(who);
        let out = mcp(
            who,
            home.path(),
            &SESSION_FLAGS,
            json!([
                {"tool": "start", "arguments": {"argv": ["cat"]}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": "one\u{0}two\n", "wait_s": 5}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "eof": true, "wait_s": 5}},
                {"tool": "read_output", "arguments": {"process_id": "$last"}},
                {"tool": "start", "arguments": {"argv": ["python3", "-u", "-i", "-q"]}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": "print(6 * 7)\n", "wait_s": 5}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": "x = 1\n", "eof": true}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                // Python writes its prompts, `42`, its newline and the newline at end of file
                // apart (unbuffered): each call may take one of those five chunks, a sixth its
                // end (a read after the end is refused, which the checks skip).
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                // The control: a sleep not signalled is still running a second later.
                {"tool": "start", "arguments": {"argv": ["sleep", "100"]}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 1}},
                {"tool": "signal", "arguments": {"process_id": "$last", "signal": "INT", "wait_s": 5}},
                {"tool": "read_output", "arguments": {"process_id": "$last"}},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        let s = |i: usize| &c[i]["structuredContent"];
        assert_eq!(s(1)["stdout"], "one\u{0}two\n", "{who:?}: {}", c[1]);
        assert_eq!(s(1)["running"], true);
        assert_eq!(s(2)["running"], false, "{who:?}: {}", c[2]);
        assert_eq!(s(2)["exit_code"], 0);
        assert!(
            text(&c[2]).starts_with("process 1: exit status 0"),
            "{}",
            c[2]
        );
        // Its result was read: the id is forgotten.
        assert!(is_error(&c[3]), "{who:?}: {}", c[3]);
        assert!(text(&c[3]).contains("process_id: no process 1"), "{}", c[3]);
        // The answer comes after the prompt, in this read or the next ones; the process ends
        // at end of file, reported once (a read after that is refused).
        let answered: String = (5..=10).filter_map(|i| s(i)["stdout"].as_str()).collect();
        assert!(answered.contains("42"), "{who:?}: {c:?}");
        assert!(
            (5..=10).any(|i| s(i)["exit_code"] == 0 && s(i)["running"] == false),
            "{who:?}: {c:?}"
        );
        assert_eq!(s(12)["running"], true, "{who:?}: {}", c[12]);
        assert_eq!(s(13)["running"], false, "{who:?}: {}", c[13]);
        assert_eq!(s(13)["signal"], 2, "{who:?}: {}", c[13]);
        assert!(
            text(&c[13]).contains("killed by signal 2 (SIGINT)"),
            "{}",
            c[13]
        );
        assert!(is_error(&c[14]));
    }
}

#[test]
fn session_tools_refuse_hostile_input_and_run_nothing() {
    for who in BOTH {
        let home = Home::new(who);
        let marker = home.project().join("ran");
        let m = marker.display().to_string();
        let touch = json!(["touch", m]);
        let big = "x".repeat(1024 * 1024 + 1);
        let out = mcp(
            who,
            home.path(),
            &SESSION_FLAGS,
            json!([
                {"tool": "start", "arguments": {"argv": touch, "profile": "none"}},
                {"tool": "start", "arguments": {"argv": touch, "network": "host"}},
                {"tool": "start", "arguments": {"argv": touch, "env": {"A": "b"}}},
                {"tool": "start", "arguments": {"argv": touch, "cwd": "/"}},
                {"tool": "start", "arguments": {"argv": touch, "command": "touch x"}},
                {"tool": "start", "arguments": {}},
                {"tool": "start", "arguments": {"command": format!("touch {m}\u{0}")}},
                {"tool": "start", "arguments": {"argv": touch, "timeout_s": 0}},
                {"tool": "start", "arguments": {"argv": touch, "wait_s": 31}},
                {"tool": "list", "arguments": {}},
                // Nothing ran: the session was not even started.
                {"tool": "start", "arguments": {"argv": ["cat"]}},
                {"tool": "read_output", "arguments": {"process_id": 99}},
                {"tool": "read_output", "arguments": {"process_id": 0}},
                {"tool": "read_output", "arguments": {"process_id": -1}},
                {"tool": "read_output", "arguments": {"process_id": "1"}},
                {"tool": "read_output", "arguments": {"process_id": 1.5}},
                {"tool": "signal", "arguments": {"process_id": "$last", "signal": "FOO"}},
                {"tool": "signal", "arguments": {"process_id": "$last", "signal": "9"}},
                {"tool": "signal", "arguments": {"process_id": "$last", "signal": ""}},
                {"tool": "signal", "arguments": {"process_id": "$last", "signal": "INT\u{0}"}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": big}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": 5}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "profile": "none"}},
                // cat is still there and takes what is valid.
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": "ok\n", "eof": true, "wait_s": 5}},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                // The control: the same touch, valid, runs.
                {"tool": "start", "arguments": {"argv": touch, "wait_s": 5}},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        let refusals = [
            (0, "unknown argument `profile`: start takes argv, command, timeout_s, wait_s; the policy"),
            (1, "unknown argument `network`"),
            (2, "unknown argument `env`"),
            (3, "unknown argument `cwd`"),
            (4, "give argv or command, not both"),
            (5, "argv or command: missing"),
            (6, "command: must not contain NUL"),
            (7, "timeout_s: must be between 1 and 86400 seconds"),
            (8, "wait_s: must be a number of seconds from 0 to 30"),
            (11, "process_id: no process 99"),
            (12, "process_id: must be a positive integer"),
            (13, "process_id: must be a positive integer"),
            (14, "process_id: must be a positive integer"),
            (15, "process_id: must be a positive integer"),
            (16, "signal: `FOO` is not one of INT, TERM, KILL, HUP, QUIT"),
            (17, "signal: `9` is not one of"),
            (18, "signal: `` is not one of"),
            (19, "signal: `INT\\x00` is not one of"),
            (20, "data: 1048577 bytes; at most 1048576 in one call"),
            (21, "data: must be a string"),
            (22, "unknown argument `profile`: write_stdin takes"),
        ];
        for (i, want) in refusals {
            assert!(is_error(&c[i]), "{who:?} {i}: {}", c[i]);
            let t = text(&c[i]);
            assert!(
                t.starts_with("sandbox: refused: ") && t.contains(want),
                "{who:?} {i}: {want}: {t}"
            );
            assert!(c[i].get("structuredContent").is_none(), "{i}: {}", c[i]);
        }
        assert_eq!(
            c[9]["structuredContent"],
            json!({"session": false, "processes": []}),
            "{who:?}"
        );
        assert!(!is_error(&c[10]), "{who:?}: {}", c[10]);
        assert_eq!(
            c[23]["structuredContent"]["stdout"], "ok\n",
            "{who:?}: {}",
            c[23]
        );
        // It ends at end of file: reported by that write or by the read after it.
        assert!(
            [23, 24]
                .iter()
                .any(|&i| c[i]["structuredContent"]["exit_code"] == 0),
            "{who:?}: {} {}",
            c[23],
            c[24]
        );
        assert!(!is_error(&c[25]), "{who:?}: {}", c[25]);
        assert!(marker.exists(), "{who:?}: the valid touch did not run");
    }
}

#[test]
fn session_output_is_capped_dropping_the_oldest() {
    // The cap is the policy's max_output_bytes (256 KiB) of unread text per stream.
    let cap = 256 * 1024;
    for who in BOTH {
        let home = Home::new(who);
        let out = mcp(
            who,
            home.path(),
            &SESSION_FLAGS,
            json!([
                {"tool": "start", "arguments": {"command": "head -c 600000 /dev/zero | tr '\\0' a; printf END; head -c 1000 /dev/zero | tr '\\0' b >&2"}},
                {"sleep": 2},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
                // The control: output under the cap comes whole.
                {"tool": "start", "arguments": {"command": "head -c 100000 /dev/zero | tr '\\0' a; printf END"}},
                {"sleep": 2},
                {"tool": "read_output", "arguments": {"process_id": "$last", "wait_s": 5}},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        let big = &c[2]["structuredContent"];
        let stdout = big["stdout"].as_str().unwrap();
        assert_eq!(stdout.len(), cap, "{who:?}");
        assert!(
            stdout.ends_with("aaaEND"),
            "{who:?}: the newest bytes are kept"
        );
        assert_eq!(
            big["stdout_dropped"],
            600_003 - cap as u64,
            "{who:?}: {}",
            big["stdout_dropped"]
        );
        assert_eq!(big["stderr"].as_str().unwrap().len(), 1000);
        assert_eq!(big["stderr_dropped"], 0);
        assert_eq!(big["exit_code"], 0);
        assert!(text(&c[2]).contains(&format!("[{} bytes of stdout dropped", 600_003 - cap)));
        let small = &c[5]["structuredContent"];
        assert_eq!(small["stdout"].as_str().unwrap().len(), 100_003, "{who:?}");
        assert_eq!(small["stdout_dropped"], 0);
    }
}

#[test]
fn nothing_outlives_the_client() {
    for who in BOTH {
        let home = Home::new(who);
        let marker = format!("987.{}", who as u8 + 1);
        let out = mcp(
            who,
            home.path(),
            &SESSION_FLAGS,
            json!([
                {"tool": "start", "arguments": {"argv": ["sleep", marker]}},
                {"tool": "start", "arguments": {"command": format!("sleep {marker}1 & sleep {marker}2")}},
                // A write the process never reads: the call waits on a full pipe, and the
                // client stops waiting for it.
                {"tool": "start", "arguments": {"argv": ["sleep", format!("{marker}3")]}},
                {"tool": "write_stdin", "arguments": {"process_id": "$last", "data": "x".repeat(1024 * 1024)}, "cancel_after": 1},
                // The control: while the client is connected, they run (and are seen).
                {"procs": marker},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        // The first `sleep`, the shell that waits for the second, its two sleeps, the third.
        assert_eq!(c[4]["procs"], 5, "{who:?}: {out}");
        assert_eq!(c[3]["cancelled"], true, "{who:?}: {out}");
        // The server ended at once, the blocked write included (the SDK would terminate it
        // after a grace period of its own).
        assert!(
            out["close_s"].as_f64().unwrap() < 1.5,
            "{who:?}: {}",
            out["close_s"]
        );
        // The client has gone (its stdin closed, the server ended): so have they.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let left = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
                .filter(|c| String::from_utf8_lossy(c).contains(&marker))
                .count()
        };
        while left() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(left(), 0, "{who:?}: processes outlived the client");
    }
}

#[test]
fn calls_run_at_once_and_a_cancelled_call_is_killed() {
    for who in BOTH {
        let home = Home::new(who);
        let marker = format!("876.{}", who as u8 + 1);
        let out = mcp(
            who,
            home.path(),
            &["--profile", "shell", "--timeout", "30"],
            json!([
                {"parallel": [
                    {"tool": "shell", "arguments": {"command": "sleep 3; echo long"}},
                    {"parallel": [{"sleep": 0.5}, {"tool": "run", "arguments": {"argv": ["echo", "short"]}}]},
                ]},
                {"parallel": [
                    {"tool": "run", "arguments": {"argv": ["sleep", marker]}, "cancel_after": 2},
                    {"procs": marker, "after": 1},
                ]},
                {"wait_gone": marker, "timeout": 5},
                {"tool": "run", "arguments": {"argv": ["echo", "still here"]}},
            ]),
        );
        let c = out["calls"].as_array().unwrap();
        let p = &c[0];
        // The short call, sent half a second after the long one, ended first.
        assert_eq!(p["order"], json!([1, 0]), "{who:?}: {p}");
        let short = &p["parallel"][1]["parallel"][1];
        assert_eq!(
            short["structuredContent"]["stdout"], "short\n",
            "{who:?}: {p}"
        );
        assert!(short["elapsed_s"].as_f64().unwrap() < 2.0, "{who:?}: {p}");
        assert_eq!(p["parallel"][0]["structuredContent"]["stdout"], "long\n");
        let cancel = &c[1]["parallel"];
        assert_eq!(cancel[0]["cancelled"], true, "{who:?}: {cancel}");
        // The control: the sleep ran while the call was in progress.
        assert_eq!(cancel[1]["procs"], 1, "{who:?}: {cancel}");
        assert_eq!(
            c[2]["gone"], true,
            "{who:?}: the cancelled call's sleep goes on: {}",
            c[2]
        );
        assert_eq!(
            c[3]["structuredContent"]["stdout"], "still here\n",
            "{who:?}"
        );
    }
}
