//! What the integration tests share: running a program as root or as an unprivileged user
//! (uid and gid 65534 through `setpriv`), the way agents run things: a bare environment (PATH,
//! HOME, LANG only), stdin from /dev/null.
//!
//! Each test binary compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Stdio};

pub mod contained;
pub mod moby;
pub mod runc;
pub mod unix_listener;

/// The parent of process `pid`, from `/proc/PID/stat` (after the command name, which may hold
/// anything up to its last `)`).
pub fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// The `sandbox` binary under test.
pub const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

/// The uid and gid of the unprivileged runs.
pub const NOBODY: u32 = 65534;

/// The PATH of the bare environment.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Who runs a command: root (this test's own user) or uid 65534, which permission checks do
/// not exempt, so a protection test runs as both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum As {
    Root,
    Nobody,
}

/// Both users, root first.
pub const BOTH: [As; 2] = [As::Root, As::Nobody];

/// `program` run as `who` in a bare environment: PATH [`PATH`], LANG C.UTF-8, HOME `/root` for
/// root and `/nonexistent` (not writable) for uid 65534, stdin /dev/null. Callers add arguments
/// and may override any of these.
pub fn command(who: As, program: impl AsRef<OsStr>) -> Command {
    let mut c = match who {
        As::Root => Command::new(program),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(program);
            c
        }
    };
    c.env_clear()
        .env("PATH", PATH)
        .env("LANG", "C.UTF-8")
        .env(
            "HOME",
            match who {
                As::Root => "/root",
                As::Nobody => "/nonexistent",
            },
        )
        .stdin(Stdio::null());
    c
}

/// The embedded preload extracted into a directory every user may read, for a test that
/// runs the host itself under the preload's filter (as a container's seccomp profile would
/// put it): the directory (removed on drop) and the library's path.
pub fn extracted_preload() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libsandbox.so");
    let o = Command::new(SANDBOX)
        .args(["extract", "--to"])
        .arg(&lib)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    (dir, lib)
}

/// `host` (a `sandbox` command) run under the preload `lib`'s filter, which answers `call`
/// with `action` (`errno:EPERM`): a container's seccomp profile that refuses the call, as
/// Docker's refuses `pidfd_getfd` without `CAP_SYS_PTRACE`.
pub fn under_host_filter<'a>(
    host: &'a mut Command,
    lib: &std::path::Path,
    call: &str,
    action: &str,
) -> &'a mut Command {
    host.env("LD_PRELOAD", lib)
        .env("SECCOMP_SYSCALL_DENY", call)
        .env("SECCOMP_DEFAULT_ACTION", action)
}

/// The `sandbox` binary run as `who`, as [`command`] sets it up.
pub fn sandbox(who: As) -> Command {
    command(who, SANDBOX)
}

/// Runs `cmd` with `input` on its stdin (closed after), stdout and stderr captured unless
/// the caller set them: how the tests feed a JSON request to `sandbox exec --json`.
pub fn output_with_input(cmd: &mut Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the command");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .expect("write the input");
    child.wait_with_output().expect("wait for the command")
}

/// Set in a re-executed test binary that runs one test as uid 65534 ([`as_both`]).
const AS_NOBODY: &str = "SANDBOX_TEST_AS_NOBODY";

/// Runs `body` as root here, then the test `name` of this very binary again as uid 65534 in
/// a bare environment (for tests whose body uses the library in-process: it must run as that
/// user itself, not only start commands as it).
pub fn as_both(name: &str, body: impl Fn(As)) {
    if std::env::var_os(AS_NOBODY).is_some() {
        body(As::Nobody);
        return;
    }
    for who in BOTH {
        match who {
            As::Root => body(As::Root),
            As::Nobody => {
                let exe = std::env::current_exe().expect("the test binary");
                let out = command(As::Nobody, exe)
                    .args(["--exact", name, "--nocapture", "--test-threads=1"])
                    .env(AS_NOBODY, "1")
                    .current_dir("/")
                    .output()
                    .expect("run the test as uid 65534");
                let text = String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() && text.contains("1 passed"),
                    "as uid {NOBODY}: {text}"
                );
            }
        }
    }
}
