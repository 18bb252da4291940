//! libsandbox.so under real programs: the environment interface, actions, fail-closed
//! behaviour, inheritance, threads, foreign ABIs and garbage input.

use sandbox_tests::{compile_c, Build};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The embedded preload, extracted once for this test binary.
fn so() -> &'static Path {
    static SO: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, p) = SO.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("preload-test")
            .tempdir()
            .unwrap();
        let p = dir.path().join("libsandbox.so");
        std::fs::write(&p, sandbox_host::embedded::LIBSANDBOX).unwrap();
        (dir, p)
    });
    p
}

/// Runs `argv` with the preload and `vars`, nothing else of ours in the environment.
fn run(argv: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..]).env("LD_PRELOAD", so());
    for k in sandbox_host::SANDBOX_VARS
        .iter()
        .filter(|k| **k != "LD_PRELOAD")
    {
        c.env_remove(k);
    }
    c.envs(vars.iter().copied());
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const CAT_NEEDS: &str = "brk:close:exit_group:fadvise64:futex:getrandom:mmap:munmap:newfstatat:fstat:openat:read:write:lseek";

#[test]
fn cat_runs_under_an_allow_list_of_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, "hello\nworld\n").unwrap();
    let o = run(
        &["/bin/cat", f.to_str().unwrap()],
        &[("SECCOMP_SYSCALL_ALLOW", CAT_NEEDS)],
    );
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
    assert_eq!(stdout(&o), "hello\nworld\n");
    assert_eq!(stderr(&o), "", "quiet on success");
}

#[test]
fn cat_without_fadvise64_is_killed() {
    let list = CAT_NEEDS.replace("fadvise64:", "");
    let o = run(
        &["/bin/cat", "/etc/hostname"],
        &[("SECCOMP_SYSCALL_ALLOW", &list)],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS), "{:?}", o.status);
}

#[test]
fn deny_kill_ends_uname_with_sigsys() {
    let o = run(&["/bin/uname"], &[("SECCOMP_SYSCALL_DENY", "uname")]);
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
    assert_eq!(stdout(&o), "");
}

#[test]
fn deny_errno_fails_the_call_with_eperm() {
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "errno"),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "exits normally");
    assert!(
        stderr(&o).contains("Operation not permitted"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn deny_errno_name_fails_the_call_with_that_errno() {
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "errno:EACCES"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("Permission denied"), "{}", stderr(&o));
}

#[test]
fn deny_log_lets_uname_run() {
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "log"),
        ],
    );
    assert!(o.status.success());
    assert_eq!(stdout(&o), "Linux\n");
}

#[test]
fn deny_trap_names_the_syscall_and_stops_the_program() {
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "trap"),
        ],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
    assert_eq!(stderr(&o), "libsandbox: blocked syscall uname (63)\n");
    assert_eq!(stdout(&o), "");
}

#[test]
fn trap_in_an_allow_list_reports_the_first_unlisted_call() {
    let list = CAT_NEEDS.replace("fadvise64:", "");
    let o = run(
        &["/bin/cat", "/etc/hostname"],
        &[
            ("SECCOMP_SYSCALL_ALLOW", &list),
            ("SECCOMP_DEFAULT_ACTION", "trap"),
        ],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
    assert!(
        stderr(&o).contains("libsandbox: blocked syscall fadvise64 (221)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn neither_list_set_runs_unchanged() {
    let o = run(&["/bin/uname"], &[]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "Linux\n");
    assert_eq!(stderr(&o), "");
}

#[test]
fn empty_allow_list_allows_nothing() {
    let o = run(&["/bin/true"], &[("SECCOMP_SYSCALL_ALLOW", "")]);
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
}

#[test]
fn both_lists_mean_the_allow_list_minus_the_denied_entries() {
    let allow = "@base:@fd-io:@fs-read";
    let o = run(&["/bin/uname"], &[("SECCOMP_SYSCALL_ALLOW", allow)]);
    assert!(o.status.success(), "uname is in @base: {}", stderr(&o));
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_ALLOW", allow),
            ("SECCOMP_SYSCALL_DENY", "uname"),
        ],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
}

#[test]
fn groups_work_in_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    std::fs::write(&f, "group\n").unwrap();
    let o = run(
        &["/bin/cat", f.to_str().unwrap()],
        &[("SECCOMP_SYSCALL_ALLOW", "@base:@fd-io:@fs-read")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "group\n");
}

#[test]
fn verbose_prints_one_line() {
    let o = run(
        &["/bin/true"],
        &[("SECCOMP_SYSCALL_DENY", "uname"), ("SECCOMP_VERBOSE", "1")],
    );
    assert!(o.status.success());
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("libsandbox: installing deny-list filter: "),
        "{e}"
    );
}

/// Asserts a fail-closed refusal: status 125, one `libsandbox:` line naming `needle`, and the
/// program's side effect (creating a file) absent.
fn assert_refused(vars: &[(&str, &str)], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = run(&["/usr/bin/touch", marker.to_str().unwrap()], vars);
    assert_eq!(o.status.code(), Some(125), "{:?} {}", o.status, stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("libsandbox: "), "{e}");
    assert!(e.contains(needle), "`{needle}` in: {e}");
    assert!(!marker.exists(), "the program must not run");
}

#[test]
fn unknown_syscall_fails_closed() {
    assert_refused(
        &[("SECCOMP_SYSCALL_ALLOW", "read:no_such_call")],
        "entry 2 `no_such_call`: unknown syscall",
    );
}

#[test]
fn unknown_group_fails_closed() {
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "@nope")], "unknown group");
}

#[test]
fn bad_action_fails_closed() {
    assert_refused(
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "explode"),
        ],
        "SECCOMP_DEFAULT_ACTION",
    );
    assert_refused(
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "allow"),
        ],
        "allow is not a default",
    );
}

#[test]
fn empty_entries_are_ignored_as_cloudflare_does() {
    // `::uname::` denies uname (and nothing else): uname dies, touch runs.
    let o = run(&["/bin/uname"], &[("SECCOMP_SYSCALL_DENY", "::uname::")]);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGSYS),
        "{:?} {}",
        o.status,
        stderr(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = run(
        &["/usr/bin/touch", marker.to_str().unwrap()],
        &[("SECCOMP_SYSCALL_DENY", "::uname::")],
    );
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
    assert!(marker.exists());
    // Control: without the entry, uname runs.
    let o = run(&["/bin/uname"], &[("SECCOMP_SYSCALL_DENY", "::::")]);
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
}

#[test]
fn very_long_value_fails_closed() {
    let long = "a".repeat(100_000);
    assert_refused(&[("SECCOMP_SYSCALL_DENY", &long)], "longer than");
}

#[test]
fn ten_thousand_entries_fail_closed() {
    let many = vec!["read"; 10_000].join(":");
    assert_refused(
        &[("SECCOMP_SYSCALL_ALLOW", &many)],
        "more than 1024 entries",
    );
}

#[test]
fn non_ascii_fails_closed() {
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "r\u{e9}ad")], "printable ASCII");
}

#[test]
fn whitespace_fails_closed() {
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "read: write")], "whitespace");
    assert_refused(&[("SECCOMP_SYSCALL_DENY", " ")], "whitespace");
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "uname\n")], "whitespace");
}

#[test]
fn bad_rules_fail_closed() {
    assert_refused(
        &[("SECCOMP_SYSCALL_DENY", "socket(a0 == AF_NOPE)")],
        "unknown constant",
    );
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "socket(a7 == 1)")], "a0..a5");
    assert_refused(&[("SECCOMP_SYSCALL_DENY", "socket(a0 == 1")], "unbalanced");
}

#[test]
fn bad_report_fd_fails_closed() {
    assert_refused(
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_REPORT_FD", "999"),
        ],
        "SECCOMP_REPORT_FD",
    );
}

#[test]
fn the_program_does_not_see_its_configuration() {
    let o = run(
        &["/usr/bin/env"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "errno"),
        ],
    );
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(!out.contains("SECCOMP_"), "{out}");
    assert!(out.contains("LD_PRELOAD="), "other variables stay: {out}");
    // Nor in the kernel's copy of the initial environment.
    let o = run(
        &["/bin/cat", "/proc/self/environ"],
        &[("SECCOMP_SYSCALL_DENY", "uname")],
    );
    assert!(o.status.success());
    assert!(
        !stdout(&o).contains("SECCOMP_") && !stdout(&o).contains("uname"),
        "{:?}",
        stdout(&o)
    );
}

#[test]
fn children_stay_confined() {
    let o = run(
        &["/bin/sh", "-c", "uname; echo status=$?"],
        &[("SECCOMP_SYSCALL_DENY", "uname")],
    );
    assert!(o.status.success(), "sh itself never calls uname");
    assert_eq!(
        stdout(&o),
        "status=159\n",
        "uname in the child died of SIGSYS"
    );
}

#[test]
fn children_of_an_errno_filter_get_the_errno() {
    let o = run(
        &["/bin/sh", "-c", "uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "errno"),
        ],
    );
    assert!(
        stderr(&o).contains("Operation not permitted"),
        "{}",
        stderr(&o)
    );
}

const THREAD_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
static void *worker(void *arg) {
    struct utsname u;
    long r = syscall(SYS_uname, &u);
    printf("thread uname=%ld errno=%s\n", r, r ? strerror(errno) : "-");
    return 0;
}
int main(void) {
    pthread_t t;
    if (pthread_create(&t, 0, worker, 0)) return 2;
    pthread_join(t, 0);
    return 0;
}
"#;

#[test]
fn threads_started_after_main_are_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_c(dir.path(), "threads", THREAD_C, Build::Dynamic);
    let p = prog.to_str().unwrap();
    let o = run(&[p], &[]);
    assert_eq!(
        stdout(&o),
        "thread uname=0 errno=-\n",
        "unfiltered baseline"
    );
    let o = run(
        &[p],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "errno"),
        ],
    );
    assert_eq!(
        stdout(&o),
        "thread uname=-1 errno=Operation not permitted\n",
        "{}",
        stderr(&o)
    );
    let o = run(&[p], &[("SECCOMP_SYSCALL_DENY", "uname")]);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGSYS),
        "kill ends the whole process"
    );
}

const FOREIGN_ABI_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    long r;
    if (!strcmp(argv[1], "int80")) {
        /* i386 getpid (20) through the 32-bit entry point. */
        __asm__ volatile ("int $0x80" : "=a"(r) : "a"(20) : "memory");
    } else {
        /* x32 getpid: the x32 bit set on the 64-bit getpid number. */
        r = syscall(0x40000000 | SYS_getpid);
    }
    printf("returned %ld\n", r);
    return 0;
}
"#;

#[test]
fn int80_and_x32_calls_are_killed_under_a_deny_list() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_c(dir.path(), "foreign", FOREIGN_ABI_C, Build::Dynamic);
    let p = prog.to_str().unwrap();
    for how in ["int80", "x32"] {
        let o = run(&[p, how], &[]);
        assert!(
            o.status.success() && stdout(&o).starts_with("returned"),
            "{how} runs unfiltered"
        );
        let o = run(
            &[p, how],
            &[
                ("SECCOMP_SYSCALL_DENY", "uname"),
                ("SECCOMP_DEFAULT_ACTION", "errno"),
            ],
        );
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGSYS),
            "{how}: {:?} {}",
            o.status,
            stdout(&o)
        );
        assert_eq!(stdout(&o), "", "{how} never returned");
    }
}

/// Runs `argv` like [`run`], with a pipe passed as `SECCOMP_REPORT_FD`; returns what the
/// preload wrote on it too.
fn run_reporting(argv: &[&str], vars: &[(&str, &str)]) -> (Output, String) {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are new descriptors owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = w.as_raw_fd().to_string();
    let mut all = vars.to_vec();
    all.push(("SECCOMP_REPORT_FD", &fd));
    let o = run(argv, &all);
    drop(w);
    let mut text = String::new();
    std::fs::File::from(r).read_to_string(&mut text).unwrap();
    (o, text)
}

#[test]
fn report_fd_gets_the_handshake_and_the_violation() {
    let (o, text) = run_reporting(
        &["/bin/uname"],
        &[
            ("SECCOMP_SYSCALL_DENY", "uname"),
            ("SECCOMP_DEFAULT_ACTION", "trap"),
        ],
    );
    assert_eq!(o.status.signal(), Some(libc::SIGSYS));
    assert!(text.starts_with("ready "), "{text}");
    assert!(text.ends_with("violation 63 uname\n"), "{text}");
    assert_eq!(
        stderr(&o),
        "",
        "the report goes to the report descriptor, not stderr"
    );
}

#[test]
fn trap_alone_arms_the_handler_without_a_filter() {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are new descriptors owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = w.as_raw_fd().to_string();
    let o = run(
        &["/bin/uname"],
        &[
            ("SECCOMP_DEFAULT_ACTION", "trap"),
            ("SECCOMP_REPORT_FD", &fd),
        ],
    );
    drop(w);
    let mut text = String::new();
    std::fs::File::from(r).read_to_string(&mut text).unwrap();
    assert!(o.status.success(), "no filter: uname runs");
    assert_eq!(stdout(&o), "Linux\n");
    assert_eq!(text, "armed\n");
}
