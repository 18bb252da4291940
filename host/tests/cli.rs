//! The `sandbox` command with a static program: `--static-binary confine` runs it under the
//! host's outer filter alone, which still stops sockets, file writes and exec under `minimal`;
//! without the option a static program is refused.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

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
    let o = f.run(Some(CONFINE), &["./static-cat", "--socket", &port]);
    assert!(killed_by_sigsys(&o), "{:?} {}", o.status, text(&o.stderr));
    assert!(
        text(&o.stderr).contains("stopped by the filter: syscall socket"),
        "{}",
        text(&o.stderr)
    );
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

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

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
    assert_eq!(expected.len(), 4, "{expected:?}");
    for (k, v) in expected {
        let line = format!("{k}={}", v.as_str().unwrap());
        assert!(
            env_output.lines().any(|l| l == line),
            "missing `{line}` in:\n{env_output}"
        );
    }
}

#[test]
fn env_output_evaluated_by_a_shell_gives_the_exact_values() {
    for profile in ["network", "minimal", "shell"] {
        let o = bare_bash(&eval_then_env(&format!("--profile {profile}")), &[]);
        assert!(o.status.success(), "{profile}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{profile}");
        let expected = env_json(&["--profile", profile], &[]);
        assert_env_has(&text(&o.stdout), &expected);
        assert!(!text(&o.stdout).contains("NOT-EXPORTED"), "{profile}");
    }
    // One variable per line, each `export KEY='...'`.
    let o = Command::new(SANDBOX)
        .args(["env", "--profile", "minimal"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(
        out.lines()
            .all(|l| l.starts_with("export ") && l.ends_with('\'')),
        "{out}"
    );
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
