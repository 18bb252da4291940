//! The client examples under `examples/` (Go, Python, TypeScript) built and run against the
//! built `sandbox`, offline: each runs an allowed command, one whose socket call the profile
//! refuses, and a request the server rejects. They need Debian's golang-go, python3, nodejs and
//! node-typescript (`.ci/packages`; `cargo xtask ci` checks them); a missing tool fails the test, naming it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// `cmd` in a bare environment (PATH, HOME, LANG), stdin /dev/null.
fn bare(cmd: &mut Command, home: &Path) -> Output {
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{cmd:?}: {e} (is its Debian package installed? see .ci/packages)")
        })
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The three lines every serve client prints.
fn check_serve_lines(out: &str, who: &str) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{who}: {out}");
    assert!(
        lines[0].starts_with("echo: exit 0: ") && lines[0].contains("hello from the sandbox"),
        "{who}: {out}"
    );
    assert!(
        lines[1].starts_with("socket: exit 1, refused: socket by /usr/bin/python3")
            && lines[1].contains("not allowed by profile minimal"),
        "{who}: {out}"
    );
    assert!(
        lines[2].starts_with("bad: refused: argv[0]: must be an absolute path"),
        "{who}: {out}"
    );
}

/// Control for the refused socket: without the sandbox the same program succeeds.
fn socket_works_unsandboxed(home: &Path) {
    let o = bare(
        Command::new("/usr/bin/python3").args(["-c", "import socket; socket.socket()"]),
        home,
    );
    ok(&o, "python3 socket, unsandboxed");
}

#[test]
fn python_client() {
    let home = tempfile::tempdir().unwrap();
    socket_works_unsandboxed(home.path());
    let o = bare(
        Command::new("/usr/bin/python3")
            .arg(examples().join("python/sandbox_client.py"))
            .arg(SANDBOX),
        home.path(),
    );
    check_serve_lines(&ok(&o, "python client"), "python");
}

#[test]
fn typescript_client() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("dist");
    let o = bare(
        Command::new("tsc")
            .arg("-p")
            .arg(examples().join("typescript"))
            .arg("--outDir")
            .arg(&out),
        home.path(),
    );
    ok(&o, "tsc (Debian node-typescript)");
    let o = bare(
        Command::new("node")
            .arg(out.join("sandbox_client.js"))
            .arg(SANDBOX),
        home.path(),
    );
    check_serve_lines(&ok(&o, "node client"), "typescript");
}

/// Builds the Go examples offline (standard library only) into `dir`.
fn go_build(home: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let o = bare(
        Command::new("go")
            .args(["build", "-o"])
            .arg(format!("{}/", dir.display()))
            .arg("./cmd/...")
            .current_dir(examples().join("go"))
            .env("GOFLAGS", "-mod=mod")
            .env("GOPROXY", "off")
            .env("GOCACHE", home.join("go-cache"))
            .env("GOPATH", home.join("go")),
        home,
    );
    ok(&o, "go build (Debian golang-go)");
}

#[test]
fn go_clients() {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    go_build(home.path(), &bin);
    let o = bare(
        Command::new(bin.join("serveclient")).args(["-sandbox", SANDBOX]),
        home.path(),
    );
    check_serve_lines(&ok(&o, "go serve client"), "go");

    // The exec tool: `sh -c` with the preload's variables from `sandbox env --json`.
    let exectool = |profile: &str, command: &str| -> serde_json::Value {
        let o = bare(
            Command::new(bin.join("exectool"))
                .args(["-sandbox", SANDBOX, "-profile", profile, command]),
            home.path(),
        );
        serde_json::from_str(&ok(&o, "go exec tool")).unwrap()
    };
    let r = exectool("shell", "echo hi | tr a-z A-Z");
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"], "HI\n", "{r}");
    let socket = "/usr/bin/python3 -c 'import socket; socket.socket()'";
    let r = exectool("shell", socket);
    assert_eq!(r["exit_code"], 159, "the filter stopped it: {r}");
    assert!(
        r["blocked"].as_str().is_some_and(|b| b.contains("SIGSYS")),
        "{r}"
    );
    // Control: the same tool under the unrestricted profile lets the socket through.
    let r = exectool("unrestricted", socket);
    assert_eq!(r["exit_code"], 0, "{r}");
}
