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
        text(&o.stderr).contains("killed by the filter"),
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
