//! Secret-leak detection in exec results, through the library's `Request`, `sandbox exec
//! --json` and `sandbox serve`: real programs print secrets of `secret_env` and well-known token
//! shapes in several encodings; the result names what was found where, never the value, and
//! `redact_secrets` removes them from the returned output.

use sandbox_host::exec::{self, Encoding, ExecResult, LeakKind, Request};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const PY: &str = "/usr/bin/python3";
const BIN: &str = env!("CARGO_BIN_EXE_sandbox");
const SECRET: &str = "tok/3n+Value:with=chars";

/// A request running `code` in Python with `API_TOKEN` set, and marked secret when `secret`.
fn py(code: &str, secret: bool) -> Request {
    let mut r = Request::new([PY, "-c", code]);
    r.env.insert("API_TOKEN".into(), SECRET.into());
    if secret {
        r.secret_env = vec!["API_TOKEN".into()];
    }
    r
}

fn run(r: &Request) -> ExecResult {
    exec::exec(r).unwrap_or_else(|e| panic!("{:?} refused: {e}", r.argv))
}

const PRINT_ENCODINGS: &str = "import os, base64, urllib.parse, sys
s = os.environ['API_TOKEN'].encode()
print('plain', s.decode())
print('url', urllib.parse.quote(s, safe=''))
print('b64', base64.b64encode(b'user:' + s).decode())
print('b64url', base64.urlsafe_b64encode(b'x' + s).decode(), file=sys.stderr)
print('hex', (b'pre-' + s).hex())";

#[test]
fn each_encoding_is_found_and_named_without_the_value() {
    let res = run(&py(PRINT_ENCODINGS, true));
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    let found: Vec<(&str, Encoding)> = res
        .leaks
        .iter()
        .filter(|l| l.kind == LeakKind::SecretEnv)
        .map(|l| (l.stream, l.encoding))
        .collect();
    for want in [
        ("stdout", Encoding::Plain),
        ("stdout", Encoding::UrlEncoded),
        ("stdout", Encoding::Base64),
        ("stdout", Encoding::Hex),
        ("stderr", Encoding::Base64),
    ] {
        assert!(found.contains(&want), "{want:?} not in {:?}", res.leaks);
    }
    assert!(res
        .leaks
        .iter()
        .all(|l| l.variable.as_deref() == Some("API_TOKEN")));
    // The report never carries the value; the output does, since nothing asked to redact.
    let report = serde_json::to_string(&res.leaks).unwrap();
    assert!(!report.contains(SECRET), "{report}");
    assert!(res.stdout.contains(SECRET));
    // Control: the same program without `secret_env` reports nothing.
    let control = run(&py(PRINT_ENCODINGS, false));
    assert!(control.stdout.contains(SECRET));
    assert!(control.leaks.is_empty(), "{:?}", control.leaks);
}

#[test]
fn redact_secrets_removes_every_encoding() {
    let mut r = py(PRINT_ENCODINGS, true);
    r.redact_secrets = true;
    let res = run(&r);
    let plain = run(&py(PRINT_ENCODINGS, false));
    // Each encoded form as the unredacted run printed it.
    for line in plain.stdout.lines().chain(plain.stderr.lines()) {
        let (label, value) = line.split_once(' ').unwrap();
        assert!(
            !res.stdout.contains(value) && !res.stderr.contains(value),
            "{label} form still in the output:\n{}{}",
            res.stdout,
            res.stderr
        );
    }
    assert!(
        res.stdout.starts_with("plain [REDACTED:API_TOKEN]\n"),
        "{}",
        res.stdout
    );
    assert!(
        res.stderr.contains("[REDACTED:API_TOKEN]"),
        "{}",
        res.stderr
    );
    assert_eq!(res.leaks.len(), 5, "{:?}", res.leaks);
}

/// The program writes half of the secret, waits, then writes the rest: two reads.
#[test]
fn a_secret_split_across_two_reads_is_found() {
    let code = "import os, sys, time
s = os.environ['API_TOKEN']
sys.stdout.write('a=' + s[:7]); sys.stdout.flush()
time.sleep(0.3)
sys.stdout.write(s[7:] + '\\n'); sys.stdout.flush()";
    let mut r = py(code, true);
    r.redact_secrets = true;
    let res = run(&r);
    assert_eq!(res.stdout, "a=[REDACTED:API_TOKEN]\n", "{res:?}");
    assert_eq!(res.leaks.len(), 1, "{:?}", res.leaks);
    assert_eq!(res.leaks[0].encoding, Encoding::Plain);
    assert_eq!(res.leaks[0].offset, 2);
}

#[test]
fn token_shapes_are_found_without_secret_env() {
    let gh = format!("ghp_{}", "Ab12".repeat(9));
    let code = format!(
        "import base64
print('AKIAIOSFODNN7EXAMPLE')
print(base64.b64encode(b'token={gh}').decode())
print('-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\n-----END RSA PRIVATE KEY-----')
print('key sk-ant-api03-abcdefghijKLMNOP123456')"
    );
    let mut r = Request::new([PY, "-c", &code]);
    let res = run(&r);
    let kinds: Vec<(LeakKind, Encoding)> = res.leaks.iter().map(|l| (l.kind, l.encoding)).collect();
    assert_eq!(
        kinds,
        [
            (LeakKind::AwsAccessKey, Encoding::Plain),
            (LeakKind::GithubToken, Encoding::Base64),
            (LeakKind::PrivateKey, Encoding::Plain),
            (LeakKind::ApiKey, Encoding::Plain),
        ],
        "{:?}",
        res.leaks
    );
    r.redact_secrets = true;
    let res = run(&r);
    assert_eq!(
        res.stdout,
        "[REDACTED:aws_access_key]\n[REDACTED:github_token]\n[REDACTED:private_key]\nkey [REDACTED:api_key]\n"
    );
}

#[test]
fn bad_secret_env_is_refused_naming_the_field() {
    let field_of = |r: &Request| match exec::exec(r) {
        Ok(res) => panic!("ran: {res:?}"),
        Err(e) => (e.field().to_string(), e.reason()),
    };
    let mut missing = py("pass", false);
    missing.secret_env = vec!["NOT_SET".into()];
    let (field, reason) = field_of(&missing);
    assert_eq!(field, "secret_env[0]");
    assert!(reason.contains("NOT_SET"), "{reason}");
    let mut twice = py("pass", true);
    twice.secret_env.push("API_TOKEN".into());
    assert_eq!(field_of(&twice).0, "secret_env[1]");
    let mut short = py("pass", false);
    short.env.insert("PIN".into(), "1234".into());
    short.secret_env = vec!["PIN".into()];
    let (field, reason) = field_of(&short);
    assert_eq!(field, "secret_env[0]");
    assert!(reason.contains("shorter than 8"), "{reason}");
    assert!(!reason.contains("1234"), "never the value: {reason}");
    let mut many = py("pass", true);
    many.secret_env = vec!["API_TOKEN".into(); 65];
    assert_eq!(field_of(&many).0, "secret_env");
}

fn cli(input: &Value) -> (Value, i32) {
    let mut child = Command::new(BIN)
        .args(["exec", "--json"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap();
    (v, out.status.code().unwrap())
}

#[test]
fn exec_json_reports_and_redacts() {
    let req = json!({
        "argv": [PY, "-c", "import os; print('t=' + os.environ['API_TOKEN'])"],
        "env": {"API_TOKEN": SECRET},
        "secret_env": ["API_TOKEN"],
        "redact_secrets": true,
    });
    let (v, status) = cli(&req);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["stdout"], "t=[REDACTED:API_TOKEN]\n", "{v}");
    assert_eq!(
        v["leaks"],
        json!([{"stream": "stdout", "kind": "secret_env", "variable": "API_TOKEN",
                "encoding": "plain", "offset": 2, "count": 1}])
    );
    assert!(!v.to_string().contains(SECRET), "{v}");
}

#[test]
fn exec_json_hostile_values_are_refused() {
    let base = || json!({"argv": [PY, "-c", "pass"], "env": {"API_TOKEN": SECRET}});
    let cases: Vec<(Value, Value, &str)> = vec![
        (json!("secret_env"), json!(["MISSING"]), "secret_env[0]"),
        (json!("secret_env"), json!("API_TOKEN"), "secret_env"),
        (json!("secret_env"), json!([1]), "secret_env"),
        (
            json!("secret_env"),
            json!({"API_TOKEN": true}),
            "secret_env",
        ),
        (json!("secret_env"), json!([""]), "secret_env[0]"),
        (
            json!("secret_env"),
            json!(["API\u{0}TOKEN"]),
            "secret_env[0]",
        ),
        (
            json!("secret_env"),
            json!(["x".repeat(100_000)]),
            "secret_env[0]",
        ),
        (json!("redact_secrets"), json!("yes"), "redact_secrets"),
        (json!("redact_secrets"), json!(1), "redact_secrets"),
    ];
    for (key, value, field) in cases {
        let mut req = base();
        req[key.as_str().unwrap()] = value.clone();
        let (v, status) = cli(&req);
        assert_eq!(status, 125, "{key}={value}: {v}");
        assert_eq!(v["error"]["field"], json!(field), "{key}={value}: {v}");
        let reason = v["error"]["reason"].as_str().unwrap();
        assert!(reason.len() < 1000, "bounded message: {reason}");
    }
}

#[test]
fn serve_reports_and_redacts() {
    let mut child = Command::new(BIN)
        .arg("serve")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let line = json!({
        "id": "s1",
        "argv": [PY, "-c", "import os; print(os.environ['API_TOKEN'].encode().hex() * 2)"],
        "env": {"API_TOKEN": SECRET},
        "secret_env": ["API_TOKEN"],
        "redact_secrets": true,
    });
    writeln!(stdin, "{line}").unwrap();
    drop(stdin);
    let mut out = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut out)
        .unwrap();
    child.wait().unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["id"], "s1");
    assert_eq!(v["stdout"], "[REDACTED:API_TOKEN]\n", "{v}");
    assert_eq!(v["leaks"][0]["encoding"], "hex", "{v}");
    assert_eq!(v["leaks"][0]["variable"], "API_TOKEN", "{v}");
}
