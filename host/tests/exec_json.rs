//! `sandbox exec --json` as agents use it: one request on stdin, one JSON object on stdout.
//! Refusals (malformed, oversized, hostile or invalid requests) are error objects naming the
//! field, with exit status 125; requests that ran exit 0 whatever the program did.

use sandbox_host::exec::json::{run_json, REFUSED_STATUS};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs the built `sandbox exec --json` with `input` on stdin.
fn cli(input: &[u8]) -> (Value, i32, String) {
    cli_with(input, |_| {})
}

/// [`cli`] with the command adjusted first (its environment, say).
fn cli_with(input: &[u8], adjust: impl FnOnce(&mut Command)) -> (Value, i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandbox"));
    adjust(&mut cmd);
    let mut child = cmd
        .args(["exec", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    // Write from a thread: the CLI may answer (and exit) before reading everything.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    assert_eq!(
        stdout.lines().count(),
        1,
        "exactly one line of JSON: {stdout:?}"
    );
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (
        v,
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts a refusal naming `field`; returns the reason.
fn refusal(v: &Value, status: i32, field: &str) -> String {
    assert_eq!(status, REFUSED_STATUS, "{v}");
    let obj = v.as_object().unwrap();
    assert_eq!(obj.len(), 1, "only `error`: {v}");
    assert_eq!(v["error"]["field"], json!(field), "{v}");
    let reason = v["error"]["reason"]
        .as_str()
        .unwrap_or_else(|| panic!("no reason: {v}"))
        .to_string();
    assert!(!reason.is_empty());
    reason
}

fn refused_cli(input: &str, field: &str) -> String {
    let (v, status, _) = cli(input.as_bytes());
    refusal(&v, status, field)
}

fn refused_lib(input: &[u8], field: &str) -> String {
    let (out, status) = run_json(input);
    let v: Value = serde_json::from_str(&out).unwrap();
    refusal(&v, status, field)
}

// ---- requests that ran ----

#[test]
fn runs_a_request() {
    let (v, status, _) = cli(br#"{"argv": ["/bin/echo", "; pwd"]}"#);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["stdout"], "; pwd\n");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["signal"], Value::Null);
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["violation"], Value::Null);
    assert_eq!(
        v["sandboxed"],
        json!({"filter": "exact", "profile": "minimal"})
    );
    assert!(v["duration_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn failing_program_still_exits_zero() {
    let (v, status, _) =
        cli(br#"{"argv": ["/bin/sh", "-c", "echo oops >&2; exit 3"], "profile": "shell"}"#);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["stderr"], "oops\n");
}

#[test]
fn timeout_still_exits_zero() {
    let (v, status, _) = cli(br#"{"argv": ["/bin/sleep", "10"], "timeout_s": 1}"#);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["exit_code"], Value::Null);
    assert_eq!(v["signal"], 15);
}

#[test]
fn violation_in_json() {
    let script = "import socket\ntry: socket.socket()\nexcept PermissionError as e: print('denied', e.errno)";
    let (v, status, _) = cli(
        serde_json::json!({"argv": ["/usr/bin/python3", "-c", script]})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["stdout"], "denied 1\n", "{v}");
    assert_eq!(v["violation"], Value::Null, "{v}");
    let e = &v["violations"][0];
    assert_eq!(e["syscall"], "socket", "{v}");
    assert_eq!(e["count"], 1, "{v}");
    assert_eq!(e["profile"], "minimal");
    assert!(
        e["program"]
            .as_str()
            .unwrap()
            .starts_with("/usr/bin/python3"),
        "{v}"
    );
    assert_eq!(
        e["change"], "\"allow\": [\"socket\"], \"network\": \"none\"",
        "{v}"
    );
    // Control: on_violation kill ends the program at the call and names it.
    let (v, status, _) = cli(
        serde_json::json!({"argv": ["/usr/bin/python3", "-c", script], "on_violation": "kill"})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["signal"], 31, "{v}");
    assert_eq!(v["stdout"], "", "{v}");
    assert_eq!(v["violation"]["syscall"], "socket", "{v}");
    assert!(v["violation"]["number"].is_u64());
}

#[test]
fn hostile_policy_fields_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad_errno = dir.path().join("bad.toml");
    std::fs::write(
        &bad_errno,
        "description = \"x\"\ndefault_action = \"errno:EWHATEVER\"\nallow = [\"read\"]\n",
    )
    .unwrap();
    let garbage = dir.path().join("garbage.toml");
    std::fs::write(&garbage, "\u{0}\u{1}not toml [[[").unwrap();
    let unreadable = dir.path().join("unreadable.toml");
    std::fs::write(&unreadable, "description = \"x\"\n").unwrap();
    std::fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    let cases = [
        (
            serde_json::json!({"on_violation": "explode"}),
            "on_violation",
        ),
        (serde_json::json!({"on_violation": 1}), "on_violation"),
        (
            serde_json::json!({"allow": ["socket", "nosuchcall"]}),
            "allow[1]",
        ),
        (serde_json::json!({"allow": [""]}), "allow[0]"),
        (serde_json::json!({"allow": ["a:b"]}), "allow[0]"),
        (serde_json::json!({"allow": "socket"}), "allow"),
        (serde_json::json!({"deny": ["@nosuchgroup"]}), "deny[0]"),
        (
            serde_json::json!({"profile": "unrestricted", "allow": ["socket"]}),
            "allow[0]",
        ),
        (
            serde_json::json!({"profile_file": "relative.toml"}),
            "profile_file",
        ),
        (
            serde_json::json!({"profile_file": "/nonexistent/p.toml"}),
            "profile_file",
        ),
        (
            serde_json::json!({"profile_file": bad_errno}),
            "profile_file",
        ),
        (serde_json::json!({"profile_file": garbage}), "profile_file"),
        (
            serde_json::json!({"profile_file": "/dev/zero"}),
            "profile_file",
        ),
        (
            serde_json::json!({"profile_file": bad_errno, "profile": "shell"}),
            "profile_file",
        ),
    ];
    for (extra, field) in cases {
        let mut req = serde_json::json!({"argv": ["/bin/true"]});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        let (v, status, _) = cli(req.to_string().as_bytes());
        assert_eq!(status, 125, "{req}: {v}");
        assert_eq!(v["error"]["field"], field, "{req}: {v}");
        // An entry in the client's terms: the field, not the variable lists are checked under.
        let reason = v["error"]["reason"].as_str().unwrap();
        if field.starts_with("allow[") || field.starts_with("deny[") {
            assert!(!reason.contains("SECCOMP_"), "{req}: {v}");
        }
    }
    let (v, _, _) = cli(br#"{"argv": ["/bin/true"], "deny": ["socket=EBOGUS"]}"#);
    assert_eq!(
        v["error"]["reason"].as_str().unwrap(),
        "`socket=EBOGUS`: unknown action (use kill, trap, log, allow, errno or an errno name \
         such as EACCES)",
        "{v}"
    );
    // Root reads any file: the unreadable file as an unprivileged user.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let req = serde_json::json!({"argv": ["/bin/true"], "profile_file": unreadable});
    let (v, status, _) = cli_with(req.to_string().as_bytes(), |c| {
        use std::os::unix::process::CommandExt;
        c.uid(65534).gid(65534);
    });
    assert_eq!(status, 125, "{v}");
    assert_eq!(v["error"]["field"], "profile_file", "{v}");
    assert!(
        v["error"]["reason"].as_str().unwrap().contains("ermission"),
        "{v}"
    );
}

#[test]
fn allow_and_deny_adjust_the_profile_per_request() {
    let script = "import socket\ntry: socket.socket(); print('made')\nexcept PermissionError: print('denied')";
    let run = |extra: serde_json::Value| {
        let mut req = serde_json::json!({"argv": ["/usr/bin/python3", "-c", script]});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        cli(req.to_string().as_bytes()).0
    };
    // Control: refused under minimal.
    assert_eq!(run(serde_json::json!({}))["stdout"], "denied\n");
    // The hint's change, applied, allows it.
    let v = run(serde_json::json!({"allow": ["socket"]}));
    assert_eq!(v["stdout"], "made\n", "{v}");
    assert_eq!(v["violations"], serde_json::json!([]), "{v}");
    // deny takes it away from a profile that has it.
    let v = run(serde_json::json!({"profile": "network", "deny": ["socket"]}));
    assert_eq!(v["stdout"], "denied\n", "{v}");
    assert_eq!(v["violations"][0]["syscall"], "socket", "{v}");
    // A profile file.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sock.toml");
    std::fs::write(&f, "description = \"minimal with sockets\"\nallow = [\"@base\", \"@fd-io\", \"@fs-read\", \"@threads\", \"socket\"]\n").unwrap();
    let v = run(serde_json::json!({"profile_file": f}));
    assert_eq!(v["stdout"], "made\n", "{v}");
    assert_eq!(v["sandboxed"]["profile"], "sock", "{v}");
}

#[test]
fn every_field_accepted() {
    let req = json!({
        "argv": ["/bin/cat"],
        "cwd": "/tmp",
        "env": {"FOO": "bar"},
        "timeout_s": 5.5,
        "max_output_bytes": 2048,
        "profile": "minimal",
        "static_binary": "block",
        "require_sandbox": false,
        "stdin": "héllo",
        "limits": {"cpu_seconds": 3, "memory_bytes": 268435456, "fsize_bytes": 1048576, "nofile": 64}
    });
    let (v, status, _) = cli(req.to_string().as_bytes());
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["stdout"], "héllo");
}

#[test]
fn output_cap_in_json() {
    let (v, status, _) = cli(
        br#"{"argv": ["/usr/bin/head", "-c", "1000000", "/dev/zero"], "max_output_bytes": 1024}"#,
    );
    assert_eq!(status, 0);
    assert_eq!(v["stdout_truncated"], true);
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1024);
}

// ---- malformed ----

#[test]
fn malformed_json_is_refused() {
    for input in [
        "",
        " ",
        "{",
        "not json",
        "{\"argv\": [\"/bin/true\"]",
        "{'argv': []}",
        "{} {}",
        "{\"argv\": [\"/bin/true\"],}",
    ] {
        let reason = refused_cli(input, "request");
        assert!(reason.contains("malformed JSON"), "{input:?}: {reason}");
    }
}

#[test]
fn invalid_utf8_is_refused() {
    let reason = refused_lib(b"{\"argv\": [\"/bin/echo\", \"\xff\xfe\"]}", "request");
    assert!(reason.contains("malformed JSON"), "{reason}");
    let (v, status, _) = cli(b"{\"argv\": [\"/bin/echo\", \"\xff\"]}");
    refusal(&v, status, "request");
}

#[test]
fn non_object_requests_are_refused() {
    for input in ["[\"/bin/true\"]", "\"/bin/true\"", "42", "null", "true"] {
        let reason = refused_cli(input, "request");
        assert!(reason.contains("JSON object"), "{input}: {reason}");
    }
}

#[test]
fn oversized_request_is_refused() {
    let big = format!(
        r#"{{"argv": ["/bin/true"], "stdin": "{}"}}"#,
        "x".repeat(9 * 1024 * 1024)
    );
    let (v, status, _) = cli(big.as_bytes());
    let reason = refusal(&v, status, "request");
    assert!(reason.contains("larger than"), "{reason}");
}

#[test]
fn oversized_stdin_is_refused() {
    let big = format!(
        r#"{{"argv": ["/bin/true"], "stdin": "{}"}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    refused_cli(&big, "stdin");
}

// ---- unknown fields and wrong types ----

#[test]
fn unknown_fields_are_refused() {
    let reason = refused_cli(r#"{"argv": ["/bin/true"], "shell": true}"#, "shell");
    assert!(reason.contains("unknown field"), "{reason}");
    refused_cli(
        r#"{"argv": ["/bin/true"], "limits": {"stack": 1}}"#,
        "limits.stack",
    );
    refused_cli(r#"{"argv": ["/bin/true"], "Argv": []}"#, "Argv");
}

#[test]
fn wrong_types_are_refused() {
    for (input, field) in [
        (r#"{}"#, "argv"),
        (r#"{"argv": "/bin/echo hi"}"#, "argv"),
        (r#"{"argv": null}"#, "argv"),
        (r#"{"argv": [1]}"#, "argv[0]"),
        (r#"{"argv": ["/bin/echo", ["x"]]}"#, "argv[1]"),
        (r#"{"argv": ["/bin/true"], "env": ["A=1"]}"#, "env"),
        (r#"{"argv": ["/bin/true"], "env": {"A": 1}}"#, "env.A"),
        (r#"{"argv": ["/bin/true"], "env": {"A": null}}"#, "env.A"),
        (r#"{"argv": ["/bin/true"], "timeout_s": "5"}"#, "timeout_s"),
        (
            r#"{"argv": ["/bin/true"], "max_output_bytes": -1}"#,
            "max_output_bytes",
        ),
        (
            r#"{"argv": ["/bin/true"], "max_output_bytes": 2048.5}"#,
            "max_output_bytes",
        ),
        (r#"{"argv": ["/bin/true"], "profile": 5}"#, "profile"),
        (
            r#"{"argv": ["/bin/true"], "static_binary": "maybe"}"#,
            "static_binary",
        ),
        (
            r#"{"argv": ["/bin/true"], "require_sandbox": "yes"}"#,
            "require_sandbox",
        ),
        (r#"{"argv": ["/bin/true"], "stdin": 5}"#, "stdin"),
        (r#"{"argv": ["/bin/true"], "cwd": 5}"#, "cwd"),
        (r#"{"argv": ["/bin/true"], "limits": "big"}"#, "limits"),
        (
            r#"{"argv": ["/bin/true"], "limits": {"nofile": -5}}"#,
            "limits.nofile",
        ),
    ] {
        refused_lib(input.as_bytes(), field);
    }
}

// ---- each validation rule ----

#[test]
fn validation_rules_are_refused_with_their_field() {
    for (input, field, needle) in [
        (r#"{"argv": []}"#, "argv", "non-empty"),
        (r#"{"argv": [""]}"#, "argv[0]", "empty"),
        (r#"{"argv": ["/bin/echo", ""]}"#, "argv[1]", "empty"),
        (r#"{"argv": ["../bin/echo"]}"#, "argv[0]", "absolute"),
        (r#"{"argv": ["./echo"]}"#, "argv[0]", "absolute"),
        (
            r#"{"argv": ["/bin/true"], "cwd": "tmp"}"#,
            "cwd",
            "absolute",
        ),
        (
            r#"{"argv": ["/bin/true"], "cwd": "/nonexistent"}"#,
            "cwd",
            "does not exist",
        ),
        (
            r#"{"argv": ["/bin/true"], "cwd": "/bin/true"}"#,
            "cwd",
            "not a directory",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"_X": "1"}}"#,
            "env._X",
            "reserved",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"LD_PRELOAD": "/tmp/x.so"}}"#,
            "env.LD_PRELOAD",
            "extra code",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"PYTHONPATH": "/tmp"}}"#,
            "env.PYTHONPATH",
            "extra code",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"BASH_ENV": "/tmp/x"}}"#,
            "env.BASH_ENV",
            "extra code",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"SECCOMP_SYSCALL_ALLOW": ""}}"#,
            "env.SECCOMP_SYSCALL_ALLOW",
            "sandbox",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"A=B": "1"}}"#,
            "env.A=B",
            "=",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"": "1"}}"#,
            "env.",
            "empty",
        ),
        (
            r#"{"argv": ["/bin/true"], "env": {"FOO": "a\u0000b"}}"#,
            "env.FOO",
            "NUL",
        ),
        (r#"{"argv": ["/bin/echo", "a\u0000b"]}"#, "argv[1]", "NUL"),
        (
            r#"{"argv": ["/bin/true"], "timeout_s": 0}"#,
            "timeout_s",
            "between",
        ),
        (
            r#"{"argv": ["/bin/true"], "timeout_s": 86401}"#,
            "timeout_s",
            "between",
        ),
        (
            r#"{"argv": ["/bin/true"], "timeout_s": -1}"#,
            "timeout_s",
            "between",
        ),
        (
            r#"{"argv": ["/bin/true"], "max_output_bytes": 1023}"#,
            "max_output_bytes",
            "between",
        ),
        (
            r#"{"argv": ["/bin/true"], "max_output_bytes": 4194305}"#,
            "max_output_bytes",
            "between",
        ),
        (
            r#"{"argv": ["/bin/true"], "profile": "custom"}"#,
            "profile",
            "unknown profile",
        ),
        (
            r#"{"argv": ["/bin/true"], "profile": "/etc/passwd"}"#,
            "profile",
            "unknown profile",
        ),
        (
            r#"{"argv": ["/bin/true"], "limits": {"memory_bytes": 1}}"#,
            "limits.memory_bytes",
            "at least",
        ),
    ] {
        let reason = refused_lib(input.as_bytes(), field);
        assert!(reason.contains(needle), "{input}: {reason}");
    }
    // The same through the binary, for one rule.
    refused_cli(r#"{"argv": ["bin/echo", "hi"]}"#, "argv[0]");
}

// ---- programs that cannot run: 126 and 127, as shells and `env` give ----

/// Asserts the error of a program that could not be started: `argv[0]`, the reason, and the
/// shell's status both in the error and as the command's exit status.
fn cannot_run(input: &str, code: i32) -> String {
    let (v, status, stderr) = cli(input.as_bytes());
    assert_eq!(status, code, "{v} {stderr}");
    assert_eq!(v["error"]["field"], json!("argv[0]"), "{v}");
    assert_eq!(v["error"]["exit_code"], json!(code), "{v}");
    let (out, lib_status) = run_json(input.as_bytes());
    assert_eq!(lib_status, code, "{out}");
    v["error"]["reason"].as_str().unwrap().to_string()
}

#[test]
fn a_program_without_the_execute_bit_gives_126_and_a_missing_one_127() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    let req = |p: &std::path::Path| json!({"argv": [p], "profile": "shell"}).to_string();
    // Control: with the execute bit the very same file runs.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (v, status, _) = cli(req(&script).as_bytes());
    assert_eq!((status, &v["stdout"]), (0, &json!("ran\n")), "{v}");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let reason = cannot_run(&req(&script), 126);
    assert!(reason.contains("not executable"), "{reason}");
    // A directory cannot be executed either; a missing file is 127.
    cannot_run(r#"{"argv": ["/usr"]}"#, 126);
    let reason = cannot_run(r#"{"argv": ["/nonexistent/x"]}"#, 127);
    assert!(reason.contains("does not exist"), "{reason}");
    let reason = cannot_run(r#"{"argv": ["no-such-program-here"]}"#, 127);
    assert!(reason.contains("not found in PATH"), "{reason}");
    // Found in PATH but not executable: 126, naming the file.
    let name = script.file_name().unwrap().to_str().unwrap();
    let r = json!({"argv": [name], "env": {"PATH": dir.path()}}).to_string();
    let reason = cannot_run(&r, 126);
    assert!(reason.contains(script.to_str().unwrap()), "{reason}");
    // Bad input elsewhere in the same request is still reported as such (125) first.
    refused_cli(
        r#"{"argv": ["/nonexistent/x"], "timeout_s": 0}"#,
        "timeout_s",
    );
}

#[test]
fn a_bare_name_is_looked_up_in_the_request_path_and_the_result_names_the_file() {
    // The scrubbed default PATH.
    let (v, status, _) = cli(br#"{"argv": ["echo", "hi"]}"#);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["stdout"], json!("hi\n"), "{v}");
    let program = v["program"].as_str().unwrap();
    assert!(
        program == "/usr/bin/echo" || program == "/bin/echo",
        "{program}"
    );
    // The request's PATH wins, in its order; argv[0] reaches the program as given.
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("echo");
    std::fs::write(&mine, "#!/bin/sh\necho \"mine $0\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let r = json!({"argv": ["echo", "hi"], "env": {"PATH": path}, "profile": "shell"});
    let (v, status, _) = cli(r.to_string().as_bytes());
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["program"], json!(mine), "{v}");
    assert_eq!(
        v["stdout"],
        json!(format!("mine {}\n", mine.display())),
        "{v}"
    );
    // A non-executable file earlier in PATH is skipped, as execvp skips it.
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (v, status, _) = cli(r.to_string().as_bytes());
    assert_eq!((status, &v["stdout"]), (0, &json!("hi\n")), "{v}");
    // Relative PATH entries are not searched: they would name the host's directory (here one
    // holding an executable `echo`).
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (v, status, _) = cli_with(
        json!({"argv": ["echo"], "env": {"PATH": "."}})
            .to_string()
            .as_bytes(),
        |c| {
            c.current_dir(dir.path());
        },
    );
    assert_eq!(
        (status, &v["error"]["exit_code"]),
        (127, &json!(127)),
        "{v}"
    );
}

// ---- hostile ----

#[test]
fn deeply_nested_input_is_refused() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    refused_cli(&deep, "request");
    let deep_obj = format!(
        r#"{{"argv": ["/bin/true"], "env": {}{}}}"#,
        "{\"a\":".repeat(50_000),
        "}".repeat(50_000)
    );
    refused_cli(&deep_obj, "request");
}

#[test]
fn duplicate_keys_are_refused() {
    let reason = refused_cli(
        r#"{"argv": ["/nonexistent"], "argv": ["/bin/true"]}"#,
        "request",
    );
    assert!(reason.contains("duplicate key `argv`"), "{reason}");
    let reason = refused_cli(
        r#"{"argv": ["/bin/true"], "env": {"A": "1", "A": "2"}}"#,
        "request",
    );
    assert!(reason.contains("duplicate key `A`"), "{reason}");
}

#[test]
fn huge_numbers_are_refused() {
    refused_lib(br#"{"argv": ["/bin/true"], "timeout_s": 1e400}"#, "request");
    refused_lib(
        br#"{"argv": ["/bin/true"], "max_output_bytes": 18446744073709551616}"#,
        "max_output_bytes",
    );
    refused_lib(
        br#"{"argv": ["/bin/true"], "timeout_s": 1e308}"#,
        "timeout_s",
    );
}

#[test]
fn shell_injection_is_just_an_argument() {
    let (v, status, _) =
        cli(br#"{"argv": ["/bin/echo", "$(id)", "`id`", "; rm -rf /", "| cat", "&& true"]}"#);
    assert_eq!(status, 0);
    assert_eq!(v["stdout"], "$(id) `id` ; rm -rf / | cat && true\n");
}

#[test]
fn env_secrets_of_the_cli_do_not_reach_the_program() {
    let (v, _, _) = cli_with(br#"{"argv": ["/usr/bin/env"]}"#, |c| {
        c.env("ANTHROPIC_API_KEY", "sk-ant-xyz")
            .env("AWS_SECRET_ACCESS_KEY", "aws-xyz")
            .env("GITHUB_TOKEN", "ghp_xyz");
    });
    let env = v["stdout"].as_str().unwrap();
    // The persistent sandbox home, never the real one.
    let home = v["home"].as_str().unwrap();
    assert!(home.contains("/sandbox/homes/"), "{v}");
    assert!(env.contains(&format!("HOME={home}\n")), "{env}");
    for s in [
        "sk-ant-xyz",
        "aws-xyz",
        "ghp_xyz",
        "ANTHROPIC",
        "AWS_",
        "GITHUB",
    ] {
        assert!(!env.contains(s), "{s} leaked: {env}");
    }
}

#[test]
fn program_output_cannot_break_the_json() {
    let (v, status, _) = cli(br#"{"argv": ["/usr/bin/printf", "}\"\n{\"error\": 1}\\000\\a"]}"#);
    assert_eq!(status, 0);
    assert_eq!(v["stdout"], "}\"\n{\"error\": 1}\u{0}\u{7}");
}

/// The most common agent command: `bash -c` under `shell`, started with a bare environment (no
/// `SHLVL`, no `TERM`) and stdin from a pipe. bash then asks `getpeername` of its stdin.
#[test]
fn bash_c_runs_under_shell_as_agents_start_it() {
    let (v, status, stderr) = cli_with(
        br#"{"argv":["/bin/bash","-c","echo agent-ok | cat"],"profile":"shell"}"#,
        |c| {
            c.env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .env("HOME", "/tmp")
                .env("LANG", "C.UTF-8");
        },
    );
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["stdout"], "agent-ok\n", "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["violation"], Value::Null, "{v}");
    assert!(stderr.is_empty(), "{stderr}");
}

// ---- limits that were hit are named, never a silent success ----

/// Runs `script` with `sh -c` under `shell` in `dir` with `extra` fields; the result.
fn sh_in(dir: &std::path::Path, script: &str, extra: Value) -> Value {
    let mut r = json!({"argv": ["/bin/sh", "-c", script], "profile": "shell", "cwd": dir});
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    let (v, status, _) = cli(r.to_string().as_bytes());
    assert_eq!(status, 0, "{v}");
    v
}

fn hits(v: &Value) -> Vec<String> {
    serde_json::from_value(v["limits_hit"].clone()).unwrap_or_else(|_| panic!("{v}"))
}

#[test]
fn a_file_cut_at_the_size_limit_is_named_even_when_the_shell_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let limits = json!({"limits": {"fsize_bytes": 100000}});
    // Control: below the limit nothing is said.
    let v = sh_in(
        dir.path(),
        "head -c 50000 /dev/zero > small; echo done",
        limits.clone(),
    );
    assert_eq!((hits(&v), &v["warnings"]), (vec![], &json!([])), "{v}");
    // A descendant (head) dies of SIGXFSZ, the shell goes on and exits 0: named all the same.
    let v = sh_in(
        dir.path(),
        "head -c 300000 /dev/zero > big; echo done",
        limits.clone(),
    );
    assert_eq!(
        (v["exit_code"].clone(), v["stdout"].clone()),
        (json!(0), json!("done\n"))
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("big")).unwrap().len(),
        100000
    );
    assert_eq!(hits(&v), vec!["fsize"], "{v}");
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("limit hit: fsize") && w.contains("limits.fsize_bytes"),
        "{w}"
    );
    assert!(w.contains("big"), "the file is named: {w}");
    // The program itself killed by SIGXFSZ.
    let v = sh_in(dir.path(), "exec head -c 300000 /dev/zero > big2", limits);
    assert_eq!(
        (v["signal"].clone(), hits(&v)),
        (json!(25), vec!["fsize".to_string()]),
        "{v}"
    );
}

/// A run known to have written nothing (its namespace's init reaped every process of it, and
/// none dirtied a page) does not search a workspace on a file system that counts writes: a file
/// of the limit's size left there just before the run is not taken for a cut. On tmpfs, whose
/// writes go uncounted, it still is (the control), and a cut there is still found.
#[test]
fn a_run_that_wrote_nothing_searches_only_where_writes_go_uncounted() {
    let counted = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let kind = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(counted.path())
        .output()
        .unwrap();
    let kind = String::from_utf8_lossy(&kind.stdout).trim().to_string();
    if kind != "ext2/ext3" {
        // Elsewhere every run is searched, which the other fsize tests cover.
        eprintln!("skipped: the build directory is on {kind}, not ext4");
        return;
    }
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let limits = json!({"limits": {"fsize_bytes": 100000}});
    for dir in [counted.path(), shm.path()] {
        std::fs::write(dir.join("left"), vec![0u8; 100000]).unwrap();
    }
    let v = sh_in(counted.path(), "true", limits.clone());
    assert_eq!(v["isolation"]["unavailable"], Value::Null, "{v}");
    assert_eq!(hits(&v), Vec::<String>::new(), "{v}");
    let v = sh_in(shm.path(), "true", limits.clone());
    assert_eq!(hits(&v), vec!["fsize"], "control: searched on tmpfs: {v}");
    // Cuts are found on both: on tmpfs by the search its file system calls for, on the other
    // because the run wrote.
    for dir in [counted.path(), shm.path()] {
        std::fs::remove_file(dir.join("left")).unwrap();
        let v = sh_in(
            dir,
            "head -c 300000 /dev/zero > big; echo done",
            limits.clone(),
        );
        assert_eq!(
            (hits(&v), &v["stdout"]),
            (vec!["fsize".to_string()], &json!("done\n"))
        );
        assert!(v["warnings"][0].as_str().unwrap().contains("big"), "{v}");
    }
}

/// Cuts by processes the program leaves behind, or made before a timeout, are found though the
/// run's usage cannot count them whole: a background writer still alive when the program
/// exits (the namespace's init kills and reaps it, so its usage counts), an orphan without a
/// PID namespace (an init for the network namespace only: every run searched), and a run
/// ended by its timeout (the kernel reaps what the killed init leaves: searched).
#[test]
fn cuts_by_processes_a_run_leaves_behind_are_found() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let limits = json!({"limits": {"fsize_bytes": 100000}});
    let with = |extra: Value| {
        let mut l = limits.clone();
        for (k, v) in extra.as_object().unwrap() {
            l[k] = v.clone();
        }
        l
    };
    let cases = [
        (
            "(head -c 300000 /dev/zero > big; sleep 5) & sleep 1",
            limits.clone(),
        ),
        (
            "( (head -c 300000 /dev/zero > big) & ); sleep 1",
            with(json!({"isolation": "off", "network": "none"})),
        ),
        (
            "head -c 300000 /dev/zero > big; sleep 30",
            with(json!({"timeout_s": 1})),
        ),
    ];
    for (script, extra) in cases {
        let _ = std::fs::remove_file(dir.path().join("big"));
        let v = sh_in(dir.path(), script, extra);
        assert_eq!(
            std::fs::metadata(dir.path().join("big"))
                .map(|m| m.len())
                .ok(),
            Some(100000),
            "{script}: {v}"
        );
        assert!(hits(&v).contains(&"fsize".to_string()), "{script}: {v}");
    }
}

#[test]
fn time_output_and_cpu_limits_hit_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let v = sh_in(dir.path(), "echo quick", json!({"timeout_s": 5}));
    assert_eq!(hits(&v), Vec::<String>::new(), "control: {v}");
    let v = sh_in(dir.path(), "sleep 5", json!({"timeout_s": 1}));
    assert_eq!(hits(&v), vec!["time"], "{v}");
    assert!(
        v["warnings"][0].as_str().unwrap().contains("timeout_s"),
        "{v}"
    );
    let v = sh_in(
        dir.path(),
        "head -c 5000 /dev/zero",
        json!({"max_output_bytes": 1024}),
    );
    assert_eq!(
        (hits(&v), &v["stdout_truncated"]),
        (vec!["output".to_string()], &json!(true))
    );
    let v = sh_in(
        dir.path(),
        "exec /usr/bin/python3 -c 'while True: pass'",
        json!({"limits": {"cpu_seconds": 1}, "timeout_s": 10}),
    );
    assert_eq!(
        (v["signal"].clone(), hits(&v)),
        (json!(24), vec!["cpu".to_string()]),
        "{v}"
    );
}

#[test]
fn a_shell_stopped_at_vfork_is_reported_as_the_filters_kill() {
    // dash blocks every signal around vfork, so SIGSYS cannot end it there: the host ends it
    // with SIGKILL and the result still reports the filter's kill (signal 31) and the call.
    for nobody in [false, true] {
        let request = |profile: &str| {
            json!({"argv": ["/bin/sh", "-c", "/bin/true; echo after"], "profile": profile,
                   "on_violation": "kill", "env": {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}})
            .to_string()
        };
        let as_user = |c: &mut Command| {
            use std::os::unix::process::CommandExt;
            c.env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("LANG", "C.UTF-8");
            if nobody {
                c.uid(65534).gid(65534).env("HOME", "/nonexistent");
            } else {
                c.env("HOME", "/root");
            }
        };
        let (v, status, _) = cli_with(request("minimal").as_bytes(), as_user);
        assert_eq!(status, 0, "nobody={nobody}: {v}");
        assert_eq!(v["signal"], 31, "nobody={nobody}: {v}");
        assert_eq!(v["stdout"], "", "nobody={nobody}: {v}");
        assert_eq!(v["violation"]["syscall"], "vfork", "nobody={nobody}: {v}");
        assert_eq!(
            v["violation"]["program"], "/usr/bin/dash",
            "nobody={nobody}: {v}"
        );
        // Control: where vfork is allowed the same command runs through.
        let (v, status, _) = cli_with(request("shell").as_bytes(), as_user);
        assert_eq!(status, 0, "nobody={nobody}: {v}");
        assert_eq!(v["exit_code"], 0, "nobody={nobody}: {v}");
        assert_eq!(v["stdout"], "after\n", "nobody={nobody}: {v}");
    }
}
