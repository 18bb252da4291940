//! The `sandbox` command with a static program: `--static-binary confine` runs it under the
//! host's outer filter alone, which still stops sockets, file writes and exec under `minimal`;
//! without the option a static program is refused.

mod common;

use common::SANDBOX;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox");

/// A static `cat FILE`, which can also try `--socket PORT`, `--write PATH` and `--exec`.
const STATIC_CAT_C: &str = r#"#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--socket")) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) { perror("socket"); return 1; }
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_port = htons(atoi(argv[2]));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(s, (struct sockaddr *)&sa, sizeof sa)) { perror("connect"); return 1; }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        int fd = open(argv[2], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) { perror("open"); return 1; }
        return write(fd, "written\n", 8) == 8 ? 0 : 1;
    }
    if (argc == 2 && !strcmp(argv[1], "--exec")) {
        execl("/bin/echo", "echo", "EXECED", (char *)NULL);
        perror("execl");
        return 1;
    }
    if (argc != 2) return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 1; }
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (write(1, buf, n) != n) return 1;
    return n < 0;
}
"#;

/// A fresh directory holding `static-cat` and a file to print.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("static-cat.c");
        std::fs::write(&src, STATIC_CAT_C).unwrap();
        let out = Command::new("gcc")
            .arg("-static")
            .arg("-o")
            .arg(dir.path().join("static-cat"))
            .arg(&src)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run gcc ({e}); install gcc and the glibc static libraries")
            });
        assert!(
            out.status.success(),
            "gcc -static: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(dir.path().join("FILE"), "the file's contents\n").unwrap();
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `argv` in the fixture's directory, through `sandbox run` with `options` before
    /// `--`, or directly when `options` is `None`.
    fn run(&self, options: Option<&[&str]>, argv: &[&str]) -> Output {
        let mut cmd = match options {
            Some(opts) => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_sandbox"));
                c.arg("run").args(opts).arg("--").args(argv);
                c
            }
            None => {
                let mut c = Command::new(self.path(argv[0].trim_start_matches("./")));
                c.args(&argv[1..]);
                c
            }
        };
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

const CONFINE: &[&str] = &["--static-binary", "confine", "--profile", "minimal"];

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn killed_by_sigsys(o: &Output) -> bool {
    // `sandbox run` exits 128 + SIGSYS when the filter killed the program.
    o.status.code() == Some(128 + libc::SIGSYS) || o.status.signal() == Some(libc::SIGSYS)
}

#[test]
fn confine_runs_a_static_cat_under_minimal() {
    let f = Fixture::new();
    let o = f.run(Some(CONFINE), &["./static-cat", "FILE"]);
    assert!(o.status.success(), "{:?} {}", o.status, text(&o.stderr));
    assert_eq!(text(&o.stdout), "the file's contents\n");
    assert!(
        text(&o.stderr).contains("statically linked")
            && text(&o.stderr).contains("the outer filter enforces the profile"),
        "a one-line notice: {}",
        text(&o.stderr)
    );
}

#[test]
fn a_static_program_is_blocked_by_default() {
    let f = Fixture::new();
    let o = f.run(Some(&["--profile", "minimal"]), &["./static-cat", "FILE"]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "");
}

#[test]
fn confine_stops_a_static_program_opening_a_socket() {
    let f = Fixture::new();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let accepted = || match l.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    };
    let control = f.run(None, &["./static-cat", "--socket", &port]);
    assert!(
        control.status.success() && accepted(),
        "it connects unsandboxed: {}",
        text(&control.stderr)
    );
    // By default the call fails with EPERM, the program goes on, and the call is reported.
    let o = f.run(Some(CONFINE), &["./static-cat", "--socket", &port]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("was refused socket (41)"),
        "{}",
        text(&o.stderr)
    );
    assert!(!accepted(), "no connection under confine");
    // With --on-violation kill, the filter ends it and names the call.
    let mut kill = CONFINE.to_vec();
    kill.extend(["--on-violation", "kill"]);
    let o = f.run(Some(&kill), &["./static-cat", "--socket", &port]);
    assert!(killed_by_sigsys(&o), "{:?} {}", o.status, text(&o.stderr));
    assert!(!accepted(), "no connection under confine");
}

#[test]
fn confine_stops_a_static_program_writing_a_file() {
    let f = Fixture::new();
    let control = f.run(None, &["./static-cat", "--write", "control"]);
    assert!(
        control.status.success() && f.path("control").exists(),
        "it writes unsandboxed"
    );
    let o = f.run(Some(CONFINE), &["./static-cat", "--write", "written"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("Read-only file system"),
        "{}",
        text(&o.stderr)
    );
    assert!(!f.path("written").exists());
}

#[test]
fn confine_stops_a_static_program_exec() {
    let f = Fixture::new();
    let control = f.run(None, &["./static-cat", "--exec"]);
    assert_eq!(text(&control.stdout), "EXECED\n", "it execs unsandboxed");
    let o = f.run(Some(CONFINE), &["./static-cat", "--exec"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("was refused execve (59)"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(text(&o.stdout), "");
    let mut kill = CONFINE.to_vec();
    kill.extend(["--on-violation", "kill"]);
    let o = f.run(Some(&kill), &["./static-cat", "--exec"]);
    assert!(killed_by_sigsys(&o), "{:?} {}", o.status, text(&o.stderr));
    assert_eq!(text(&o.stdout), "");
}

#[test]
fn confine_reports_how_the_static_program_was_confined() {
    let f = Fixture::new();
    // A built-in profile needs no loader exemption: the outer filter is the exact profile.
    let mut opts = CONFINE.to_vec();
    opts.push("--verbose");
    let o = f.run(Some(&opts), &["./static-cat", "FILE"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("sandboxed: exact"),
        "{}",
        text(&o.stderr)
    );
    // A custom list without the loader's calls needs exemptions: outer-only, said as such.
    let custom = [
        "--static-binary",
        "confine",
        "--allow",
        "read:write:exit_group",
        "--verbose",
    ];
    let o = f.run(Some(&custom), &["./static-cat", "FILE"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "the file's contents\n");
    assert!(
        text(&o.stderr).contains("confined by the outer filter only"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("sandboxed: outer-only"),
        "{}",
        text(&o.stderr)
    );
}

/// `bash -c SCRIPT` as agents start it: only PATH, HOME and LANG, no terminal, stdin /dev/null.
/// `SANDBOX` in the script is the sandbox binary; `extra` adds variables.
fn bare_bash(script: &str, extra: &[(&str, &str)]) -> Output {
    Command::new("/bin/bash")
        .args(["-c", script])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/root")
        .env("LANG", "C.UTF-8")
        .env("SANDBOX", SANDBOX)
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The variables `sandbox env --json` prints for `args`, with `extra` in its environment.
fn env_json(args: &[&str], extra: &[(&str, &str)]) -> serde_json::Map<String, serde_json::Value> {
    let o = Command::new(SANDBOX)
        .arg("env")
        .args(args)
        .arg("--json")
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A script that evaluates `sandbox env ARGS` and prints the environment a program would get.
/// The preload removes `SECCOMP_*` from the environment of every program it enters, so `env` runs
/// with `LD_PRELOAD` emptied (glibc loads nothing then) and `LD_PRELOAD` is printed by bash
/// itself, after checking it is exported.
fn eval_then_env(args: &str) -> String {
    format!(
        "eval \"$(\"$SANDBOX\" env {args})\" || exit 9; LD_PRELOAD= /usr/bin/env; \
         printf 'LD_PRELOAD=%s\\n' \"$LD_PRELOAD\"; \
         [[ $(declare -p LD_PRELOAD) == 'declare -x '* ]] || echo NOT-EXPORTED"
    )
}

/// Asserts that `env` output holds every variable of `expected` with exactly its value.
fn assert_env_has(env_output: &str, expected: &serde_json::Map<String, serde_json::Value>) {
    // The filter's four, and the Landlock layer's SANDBOX_LANDLOCK and TMPDIR.
    assert_eq!(expected.len(), 6, "{expected:?}");
    for (k, v) in expected {
        let line = format!("{k}={}", v.as_str().unwrap());
        // SANDBOX_LANDLOCK's value spans several lines.
        assert!(
            env_output.lines().any(|l| l == line) || env_output.contains(&format!("\n{line}\n")),
            "missing `{line}` in:\n{env_output}"
        );
    }
}

#[test]
fn env_output_evaluated_by_a_shell_gives_the_exact_values() {
    for profile in ["network", "minimal", "shell"] {
        let o = bare_bash(&eval_then_env(&format!("--profile {profile}")), &[]);
        assert!(o.status.success(), "{profile}: {}", text(&o.stderr));
        // A profile whose commands may write hears, on every call, that the route cannot put
        // back what they leave in the repository or the agents' control files.
        let said = if profile == "shell" {
            "sandbox: warning: the preload route cannot guard the repository or the agents' \
             control files: a command may leave git hooks, core.fsmonitor, .claude/ or \
             .mcp.json that run later outside the sandbox (sandbox run and sandbox exec put \
             them back); pass --isolation off to say this is known\n"
        } else {
            ""
        };
        assert_eq!(text(&o.stderr), said, "{profile}");
        let expected = env_json(&["--profile", profile], &[]);
        assert_env_has(&text(&o.stdout), &expected);
        assert!(!text(&o.stdout).contains("NOT-EXPORTED"), "{profile}");
    }
    // One `export KEY='...'` per variable; only SANDBOX_LANDLOCK's value spans lines.
    let o = Command::new(SANDBOX)
        .args(["env", "--profile", "minimal"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("export ")).count(),
        6,
        "{out}"
    );
    let single = out.replace(
        &format!(
            "export SANDBOX_LANDLOCK='{}'\n",
            env_json(&["--profile", "minimal"], &[])["SANDBOX_LANDLOCK"]
                .as_str()
                .unwrap()
        ),
        "",
    );
    assert!(
        single
            .lines()
            .all(|l| l.starts_with("export ") && l.ends_with('\'')),
        "{out}"
    );
    // With the layer off, exactly one line per variable.
    let o = Command::new(SANDBOX)
        .args(["env", "--profile", "minimal", "--landlock", "off"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout).lines().count(), 4, "{}", text(&o.stdout));
}

#[test]
fn env_output_quotes_hostile_characters_in_the_library_path() {
    // The library's directory comes from XDG_CACHE_HOME, which may hold quotes and `$(...)`:
    // evaluating the output must give the path back exactly and run nothing.
    for name in [
        "x$(touch${IFS}pwned)",
        "a'b\"$(touch${IFS}pwned)`touch${IFS}pwned`'\\''",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pwned");
        let cache = dir.path().join(name);
        std::fs::create_dir(&cache).unwrap();
        let cache = cache.to_str().unwrap();
        let dir_s = dir.path().to_str().unwrap();
        let extra = [("XDG_CACHE_HOME", cache)];
        let expected = env_json(&["--profile", "minimal"], &extra);
        let lib = expected["LD_PRELOAD"].as_str().unwrap();
        assert!(lib.starts_with(cache), "{expected:?}");
        if !name.contains('\'') {
            // Control: evaluated without quoting, the name runs the planted command.
            let o = bare_bash(
                &format!("cd '{dir_s}' || exit 9; eval \"LD_PRELOAD=$LIB\""),
                &[("LIB", lib)],
            );
            assert!(o.status.success(), "{o:?}");
            assert!(marker.exists(), "control: unquoted, the command should run");
            std::fs::remove_file(&marker).unwrap();
        }
        let o = bare_bash(
            &format!("cd '{dir_s}' || exit 9; {}", eval_then_env("")),
            &extra,
        );
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        assert_env_has(&text(&o.stdout), &expected);
        assert!(!text(&o.stdout).contains("NOT-EXPORTED"), "{name}");
        assert!(
            !marker.exists(),
            "{name}: evaluating the output ran a command"
        );
    }
}

#[test]
fn a_program_started_with_evaluated_env_output_is_filtered() {
    let fork = "/usr/bin/python3 -c 'import os; os.waitpid(os.fork(), 0) if os.fork() else None'";
    // Control: without the variables, python forks and exits 0.
    let control = bare_bash(fork, &[]);
    assert!(control.status.success(), "{}", text(&control.stderr));
    let o = bare_bash(
        &format!("eval \"$(\"$SANDBOX\" env --profile minimal)\"; exec {fork}"),
        &[],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS), "{o:?}");
}

#[test]
fn env_refuses_hostile_lists_and_changes_nothing() {
    for allow in ["read\nwrite", "openat(a2 ==\n1)", "read:'x'", ""] {
        let o = Command::new(SANDBOX)
            .args(["env", "--allow", allow])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if allow.is_empty() {
            // An empty allow list is valid: it allows nothing, and is printed quoted.
            assert!(o.status.success(), "{}", text(&o.stderr));
            assert!(text(&o.stdout).contains("export SECCOMP_SYSCALL_ALLOW=''\n"));
            continue;
        }
        assert_eq!(o.status.code(), Some(125), "{allow:?}: {o:?}");
        assert_eq!(text(&o.stdout), "", "{allow:?}");
        assert_eq!(text(&o.stderr).lines().count(), 1, "{allow:?}: {o:?}");
    }
}

/// What only a runner's namespaces give (read-only binds, `required` isolation) is refused by
/// `sandbox env`, whose programs get none, rather than printed as if it would hold (control:
/// `--isolation preferred` and `off` are accepted).
#[test]
fn env_refuses_what_needs_namespaces() {
    for (args, needle) in [
        (
            &["--read-only", "/tmp"][..],
            "--read-only: needs the namespace layer",
        ),
        (&["--isolation", "required"][..], "--isolation required"),
        (&["--isolation", "preferred"][..], ""),
        (&["--isolation", "off"][..], ""),
    ] {
        let o = Command::new(SANDBOX)
            .arg("env")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if needle.is_empty() {
            assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
            continue;
        }
        assert_eq!(o.status.code(), Some(125), "{args:?}: {o:?}");
        assert_eq!(text(&o.stdout), "", "{args:?}");
        assert!(text(&o.stderr).contains(needle), "{args:?}: {o:?}");
    }
}

/// Runs the sandbox binary with `args` as uid/gid 65534 (HOME unwritable, so the preload goes
/// to a fresh temporary directory), in a bare environment, stdin /dev/null.
fn sandbox_as_nobody(args: &[&str]) -> Output {
    common::sandbox(common::As::Nobody)
        .args(args)
        .output()
        .expect("setpriv (util-linux)")
}

/// Runs the sandbox binary with `args` as the test's own user, in a bare environment.
fn sandbox_bare(args: &[&str]) -> Output {
    sandbox_bare_env(args, &[])
}

/// [`sandbox_bare`] with `extra` variables.
fn sandbox_bare_env(args: &[&str], extra: &[(&str, &str)]) -> Output {
    Command::new(SANDBOX)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/root")
        .env("LANG", "C.UTF-8")
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn run_as_root_warns_below_the_isolated_tier_unless_allowed() {
    assert!(is_root(), "this test needs root (the tests run as root)");
    // In the isolated tier root's reach is the job's view (the host's tree read-only,
    // credentials unreadable): nothing to warn about.
    let o = sandbox_bare(&["run", "--", "/bin/true"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stderr), "");
    // Below it, every run says so.
    for _ in 0..2 {
        let o = sandbox_bare(&["run", "--isolation", "off", "--", "/bin/true"]);
        assert!(o.status.success(), "{o:?}");
        let e = text(&o.stderr);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with("sandbox: warning: running as root: ")
                && e.contains("pass --allow-root to silence")
                && e.trim_end()
                    .ends_with("(tier contained: Landlock and seccomp, no namespaces)"),
            "{e}"
        );
    }
    let o = sandbox_bare(&[
        "run",
        "--allow-root",
        "--isolation",
        "off",
        "--",
        "/bin/true",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stderr), "");
    // The warning does not change what runs or the status.
    let o = sandbox_bare(&[
        "run",
        "--isolation",
        "off",
        "--profile",
        "shell",
        "--",
        "/bin/sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
}

#[test]
fn exec_and_serve_refuse_root_below_the_isolated_tier_unless_the_request_allows_it() {
    assert!(is_root(), "this test needs root (the tests run as root)");
    let exec_env = |body: &str, unavailable: bool| {
        let mut c = Command::new(BIN);
        c.args(["exec", "--json"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/root")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if unavailable {
            c.env(
                "SANDBOX_ISOLATION_UNAVAILABLE",
                "a container without namespaces",
            );
        }
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        text(&o.stdout)
    };
    let exec = |body: &str| exec_env(body, false);
    // The isolated tier: runs, nothing said.
    let out = exec(r#"{"argv":["/bin/echo","ran"]}"#);
    assert!(out.contains(r#""stdout":"ran\n""#), "{out}");
    assert!(!out.contains("running as root"), "{out}");
    // A machine without namespaces: refused, naming the field.
    let out = exec_env(r#"{"argv":["/bin/echo","ran"]}"#, true);
    assert!(
        out.contains(r#""field":"allow_root""#) && !out.contains("ran\n"),
        "{out}"
    );
    // Allowed by the request: runs (the control that the refusal is the only difference).
    let out = exec_env(r#"{"argv":["/bin/echo","ran"],"allow_root":true}"#, true);
    assert!(out.contains(r#""stdout":"ran\n""#), "{out}");
    // A layer the request turned off itself: runs, and the result says what root keeps.
    for body in [
        r#"{"argv":["/bin/echo","ran"],"isolation":"off"}"#,
        r#"{"argv":["/bin/echo","ran"],"landlock":"off"}"#,
    ] {
        let out = exec(body);
        assert!(
            out.contains(r#""stdout":"ran\n""#) && out.contains("running as root without"),
            "{body}: {out}"
        );
    }
    // A hostile value is refused and runs nothing.
    let out = exec(r#"{"argv":["/bin/echo","ran"],"allow_root":"yes"}"#);
    assert!(out.contains(r#""field":"allow_root""#), "{out}");
    // Through serve, the same request field.
    let mut c = Command::new(BIN);
    c.arg("serve")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/root")
        .env(
            "SANDBOX_ISOLATION_UNAVAILABLE",
            "a container without namespaces",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                b"{\"id\":\"a\",\"argv\":[\"/bin/true\"]}\n\
                  {\"id\":\"b\",\"argv\":[\"/bin/true\"],\"allow_root\":true}\n",
            )
            .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let out = text(&o.stdout);
    let a = out
        .lines()
        .find(|l| l.contains(r#""id":"a""#))
        .unwrap_or_default();
    let b = out
        .lines()
        .find(|l| l.contains(r#""id":"b""#))
        .unwrap_or_default();
    assert!(a.contains(r#""field":"allow_root""#), "{out}");
    assert!(b.contains(r#""exit_code":0"#), "{out}");
}

#[test]
fn run_as_an_unprivileged_user_is_quiet() {
    let o = sandbox_as_nobody(&["run", "--", "/bin/true"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stderr), "");
    // The flag is accepted there too, and changes nothing.
    let o = sandbox_as_nobody(&["run", "--allow-root", "--", "/bin/true"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stderr), "");
}

/// The `sandbox check` line for `name`: (level, detail).
fn check_line(out: &str, name: &str) -> (String, String) {
    let line = out
        .lines()
        .find(|l| l[6..].starts_with(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{out}"));
    (
        line[..6].trim().to_string(),
        line[6 + name.len() + 2..].to_string(),
    )
}

#[test]
fn check_reports_root_as_a_warning_and_an_unprivileged_user_as_ok() {
    assert!(is_root(), "this test needs root (the tests run as root)");
    let o = sandbox_bare(&["check"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let (level, detail) = check_line(&text(&o.stdout), "user");
    assert_eq!(level, "warn");
    assert!(detail.starts_with("running as root: "), "{detail}");
    let o = sandbox_as_nobody(&["check"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let (level, detail) = check_line(&text(&o.stdout), "user");
    assert_eq!(
        (level.as_str(), detail.as_str()),
        ("ok", "uid 65534, not root")
    );
}

#[test]
fn check_reports_yama_as_the_kernel_has_it() {
    let o = sandbox_bare(&["check"]);
    let (level, detail) = check_line(&text(&o.stdout), "yama");
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Err(_) => {
            assert_eq!(level, "warn");
            assert!(detail.starts_with("Yama is not loaded: "), "{detail}");
            assert!(detail.contains("/proc/PID/mem"), "{detail}");
        }
        Ok(v) if v.trim() == "0" => {
            assert_eq!(level, "warn");
            assert!(detail.contains("ptrace_scope is 0"), "{detail}");
        }
        Ok(v) => {
            assert_eq!(level, "ok");
            assert!(detail.starts_with(&format!("ptrace_scope {}", v.trim())));
        }
    }
}

#[test]
fn check_reports_the_landlock_abi() {
    // SAFETY: the version query reads and writes no memory.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    let o = sandbox_bare(&["check"]);
    let (level, detail) = check_line(&text(&o.stdout), "landlock");
    if abi >= 6 {
        assert_eq!(level, "ok");
        assert!(detail.starts_with(&format!("ABI {abi}")), "{detail}");
        // As on an older kernel: what is missing, with the ABI and Linux release it needs.
        let o = sandbox_bare_env(&["check"], &[("SANDBOX_LANDLOCK_MAX_ABI", "3")]);
        let (level, detail) = check_line(&text(&o.stdout), "landlock");
        assert_eq!(level, "warn", "{detail}");
        assert!(detail.starts_with("ABI 3"), "{detail}");
        for what in [
            "TCP bind and connect rules (ABI 4, Linux 6.7)",
            "scoping (ABI 6",
        ] {
            assert!(detail.contains(what), "{detail}");
        }
        assert!(!detail.contains("truncation"), "{detail}");
    } else if abi > 0 {
        assert_eq!(level, "warn");
        assert!(detail.contains("missing"), "{detail}");
    } else {
        assert_eq!(level, "warn");
        assert!(detail.contains("syscall filter alone"), "{detail}");
    }
}

#[test]
fn check_reports_user_namespaces_and_cgroup_delegation() {
    let o = sandbox_bare(&["check"]);
    let stdout = text(&o.stdout);
    let (level, detail) = check_line(&stdout, "user namespaces");
    let off = |p: &str, v: &str| std::fs::read_to_string(p).is_ok_and(|s| s.trim() == v);
    let blocked = off("/proc/sys/kernel/unprivileged_userns_clone", "0")
        || off("/proc/sys/user/max_user_namespaces", "0")
        || off(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "1",
        );
    assert_eq!(level, if blocked { "warn" } else { "ok" }, "{detail}");
    // Root can create a cgroup in its own cgroup here; uid 65534 cannot (no delegation).
    let (level, detail) = check_line(&stdout, "cgroup v2");
    assert_eq!(level, "ok", "{detail}");
    let dir = detail
        .strip_prefix("can create cgroups under ")
        .unwrap_or_else(|| panic!("{detail}"))
        .to_string();
    let o = sandbox_as_nobody(&["check"]);
    let (level, detail) = check_line(&text(&o.stdout), "cgroup v2");
    assert_eq!(level, "warn", "{detail}");
    assert!(detail.contains("Delegate=yes"), "{detail}");
    // Nothing is left behind by the probe.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".sandbox-check-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn check_says_how_memory_and_processes_are_limited() {
    // As root on this machine the v1 hierarchies (or a cgroup v2 with the controllers) hold
    // both limits; uid 65534 can create cgroups in neither.
    let v1 = |c: &str| std::path::Path::new(&format!("/sys/fs/cgroup/{c}")).is_dir();
    let stdout = text(&sandbox_bare(&["check"]).stdout);
    if is_root() && v1("memory") && v1("pids") {
        for (name, file) in [
            ("memory limit", "memory.limit_in_bytes"),
            ("process limit", "pids.max"),
        ] {
            let (level, detail) = check_line(&stdout, name);
            assert_eq!(level, "ok", "{detail}");
            assert!(
                detail.contains(file) || detail.contains("cgroup v2"),
                "{detail}"
            );
        }
    }
    let stdout = text(&sandbox_as_nobody(&["check"]).stdout);
    let (level, detail) = check_line(&stdout, "memory limit");
    if level == "warn" {
        // The job-wide watchdog (this host reads /proc), never an address-space limit.
        assert!(
            detail.contains("watchdog") && detail.contains("whole job"),
            "{detail}"
        );
        assert!(!detail.contains("RLIMIT_AS"), "{detail}");
    }
    let (level, detail) = check_line(&stdout, "process limit");
    if level == "warn" {
        assert!(detail.contains("limits.processes is refused"), "{detail}");
    }
}

#[test]
fn check_prints_one_line_per_check_each_with_a_level() {
    for o in [sandbox_bare(&["check"]), sandbox_as_nobody(&["check"])] {
        let stdout = text(&o.stdout);
        assert_eq!(text(&o.stderr), "");
        for line in stdout.lines() {
            assert!(
                line.starts_with("ok    ")
                    || line.starts_with("warn  ")
                    || line.starts_with("FAIL  "),
                "{line}"
            );
        }
        for name in [
            "user",
            "yama",
            "landlock",
            "user namespaces",
            "cgroup v2",
            "memory limit",
            "process limit",
        ] {
            check_line(&stdout, name);
        }
    }
}

/// Runs `sandbox run --allow-root --config CONFIG -- /bin/true` in a bare environment.
fn run_with_config(config: &serde_json::Value, dir: &std::path::Path) -> Output {
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).unwrap();
    sandbox_bare(&[
        "run",
        "--allow-root",
        "--config",
        path.to_str().unwrap(),
        "--",
        "/bin/true",
    ])
}

#[test]
fn config_libsandbox_path_is_verified() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libsandbox.so");
    std::fs::write(&lib, sandbox_host::embedded::LIBSANDBOX).unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = |extra: serde_json::Value| {
        let mut sandbox = serde_json::json!({"libsandboxPath": lib});
        sandbox
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::json!({"tools": {"exec": {"sandbox": sandbox}}})
    };
    // Control: a copy of the embedded library is accepted, quietly.
    let o = run_with_config(&config(serde_json::json!({})), dir.path());
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stderr), "");
    // World-writable: refused with one line naming the file and the fix.
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = run_with_config(&config(serde_json::json!({})), dir.path());
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let e = text(&o.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("libsandbox.so") && e.contains("chmod go-w"),
        "{e}"
    );
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Another library without its hash: refused; with a wrong hash: refused.
    let other = dir.path().join("other.so");
    std::fs::copy("/lib/x86_64-linux-gnu/libm.so.6", &other).unwrap();
    let o = run_with_config(
        &serde_json::json!({"tools": {"exec": {"sandbox": {"libsandboxPath": other}}}}),
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(text(&o.stderr).contains("libsandboxSha256"), "{o:?}");
    let o = run_with_config(
        &config(serde_json::json!({"libsandboxSha256": "0".repeat(64)})),
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert!(
        text(&o.stderr).contains("differs from libsandboxSha256"),
        "{o:?}"
    );
    // Malformed hashes, and a hash without a path, are config errors.
    for bad in ["xyz", "", "0"] {
        let mut c = config(serde_json::json!({"libsandboxSha256": bad}));
        if bad.is_empty() {
            c = serde_json::json!({"tools": {"exec": {"sandbox": {"libsandboxSha256": "0".repeat(64)}}}});
        }
        let o = run_with_config(&c, dir.path());
        assert_eq!(o.status.code(), Some(125), "{bad:?}: {o:?}");
        assert_eq!(text(&o.stderr).lines().count(), 1, "{o:?}");
        assert!(text(&o.stderr).contains("libsandboxSha256"), "{o:?}");
    }
}

#[test]
fn a_home_that_does_not_exist_is_not_created() {
    // System users have HOME=/nonexistent: the library goes to a private temporary directory
    // instead of creating that HOME (control: an existing HOME gets .cache/sandbox).
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("nonexistent");
    let go = |home: &Path| {
        Command::new(SANDBOX)
            .args(["env", "--json", "--profile", "minimal"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = go(&home);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!home.exists(), "HOME was created");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let lib = v["LD_PRELOAD"].as_str().unwrap();
    assert!(
        Path::new(lib).is_file() && !lib.starts_with(home.to_str().unwrap()),
        "{lib}"
    );
    let o = go(dir.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dir.path().join(".cache/sandbox").is_dir());
}

#[test]
fn check_reports_the_tier_a_run_gets_and_fails_where_a_run_fails() {
    use common::{sandbox, BOTH};
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let tier_of_run = |who, env: &[(&str, &str)]| {
        let o = sandbox(who)
            .args(["run", "-v", "--allow-root", "--", "true"])
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
        let err = text(&o.stderr);
        let tier = err
            .split("tier: ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .unwrap_or_else(|| panic!("{who:?}: {err}"))
            .to_string();
        tier
    };
    let check = |who, env: &[(&str, &str)]| {
        let o = sandbox(who)
            .args(["check", "--json"])
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code(), report)
    };
    for who in BOTH {
        // Here namespaces work: both say isolated.
        assert_eq!(tier_of_run(who, &[]), "isolated");
        let (code, report) = check(who, &[]);
        assert_eq!(code, Some(0), "{who:?}: {report}");
        assert_eq!(report["tier"], "isolated", "{who:?}: {report}");
        assert_eq!(report["run"]["tier"], "isolated", "{who:?}: {report}");
        // Without namespaces (forced), both say contained.
        let forced = [("SANDBOX_ISOLATION_UNAVAILABLE", "test")];
        assert_eq!(tier_of_run(who, &forced), "contained");
        let (code, report) = check(who, &forced);
        assert_eq!(code, Some(0), "{who:?}: {report}");
        assert_eq!(report["tier"], "contained", "{who:?}: {report}");
    }
    // Where a default run fails (inside another sandbox, whose profile refuses what the inner
    // one needs), check fails too, naming the run; the run itself is the control.
    let inner_run = sandbox(common::As::Nobody)
        .args([
            "run",
            "--profile",
            "minimal",
            "--",
            SANDBOX,
            "run",
            "--",
            "true",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(inner_run.status.code(), Some(125), "{inner_run:?}");
    let o = sandbox(common::As::Nobody)
        .args([
            "run",
            "--profile",
            "minimal",
            "--",
            SANDBOX,
            "check",
            "--json",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["ok"], false, "{report}");
    assert!(report["tier"].is_null(), "{report}");
    assert!(report["error"].is_string(), "{report}");
}

#[test]
fn check_refuses_a_value_or_an_argument_for_json() {
    for args in [
        &["check", "--json=yes"][..],
        &["check", "--json", "extra"],
        &["check", "--json", ""],
        &["check", "--json\nx"],
    ] {
        let o = common::sandbox(common::As::Nobody)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(o.stdout.is_empty(), "{args:?}: nothing ran: {o:?}");
        assert!(text(&o.stderr).contains("error:"), "{args:?}: {o:?}");
    }
}

/// `--version` says what a bug report needs: the version, the commit it was built from, the
/// target and the features built in.
#[test]
fn version_names_the_commit_target_and_features() {
    let o = std::process::Command::new(common::SANDBOX)
        .arg("--version")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    let want = format!("sandbox {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&want), "{out}");
    assert!(
        out.contains(", x86_64-unknown-linux-") || out.contains(", aarch64-unknown-linux-"),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with(')') && out.contains("features: "),
        "{out}"
    );
    let commit = out["sandbox ".len()..]
        .split("commit ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_default();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{out}"
    );
}
