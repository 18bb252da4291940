//! What the built-in profiles promise, call by call: a small C program (compiled here with gcc)
//! makes one syscall attempt per run and prints its result; each test checks the result AND the
//! side effect (the file is absent, unchanged ...). Every refusal is also run without a filter,
//! where it must succeed and change things, so a check that cannot see a change fails.

use sandbox_policy::profile::Profile;
use sandbox_policy::Action;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/io_uring.h>
#include <termios.h>
#include <unistd.h>

static const char *ename(int e) {
    switch (e) {
    case EROFS: return "EROFS";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case EIO: return "EIO";
    default: return "E?";
    }
}

/* Prints "ok N" or "err ENAME" and exits 0: the result is the output, not the status. */
static int report(long r) {
    if (r < 0) printf("err %s\n", ename(errno));
    else printf("ok %ld\n", r);
    fflush(stdout);
    return 0;
}

static void *thread_main(void *arg) { return arg; }

/* A connection to ourselves through a listening socket: 0 when bytes made the round trip. */
static long loopback(int family) {
    int srv = socket(family, SOCK_STREAM, 0);
    if (srv < 0) return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_UNIX) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        un->sun_family = AF_UNIX;
        /* abstract address: no file is created */
        snprintf(un->sun_path + 1, sizeof un->sun_path - 1, "sandbox-test-%d", getpid());
        len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(un->sun_path + 1);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *in;
    }
    if (bind(srv, (struct sockaddr *)&ss, len) < 0) return -1;
    if (listen(srv, 1) < 0) return -1;
    len = sizeof ss;
    if (getsockname(srv, (struct sockaddr *)&ss, &len) < 0) return -1;
    int cli = socket(family, SOCK_STREAM, 0);
    if (cli < 0) return -1;
    if (connect(cli, (struct sockaddr *)&ss, len) < 0) return -1;
    int conn = accept(srv, NULL, NULL);
    if (conn < 0) return -1;
    char buf[8] = {0};
    if (write(cli, "ping", 4) != 4) return -1;
    if (read(conn, buf, sizeof buf) != 4 || memcmp(buf, "ping", 4) != 0) { errno = EIO; return -1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *a = argv[1];
    if (!strcmp(a, "open_wronly")) return report(open("f", O_WRONLY));
    if (!strcmp(a, "open_creat")) return report(open("new", O_RDONLY | O_CREAT, 0644));
    if (!strcmp(a, "open_trunc")) return report(open("f", O_RDWR | O_TRUNC));
    if (!strcmp(a, "open_append")) return report(open("f", O_WRONLY | O_APPEND));
    if (!strcmp(a, "raw_open_creat")) return report(syscall(SYS_open, "new", O_RDWR | O_CREAT, 0644));
    if (!strcmp(a, "openat_tmpfile")) return report(open(".", O_RDWR | O_TMPFILE, 0600));
    if (!strcmp(a, "creat")) return report(creat("new", 0644));
    if (!strcmp(a, "truncate")) return report(truncate("f", 0));
    if (!strcmp(a, "ftruncate")) {
        int fd = open("f", O_RDWR);
        if (fd < 0) return report(fd);
        return report(ftruncate(fd, 0));
    }
    if (!strcmp(a, "rename")) return report(rename("f", "g"));
    if (!strcmp(a, "unlink")) return report(unlink("f"));
    if (!strcmp(a, "rmdir")) return report(rmdir("d"));
    if (!strcmp(a, "mkdir")) return report(mkdir("newdir", 0755));
    if (!strcmp(a, "link")) return report(link("f", "hard"));
    if (!strcmp(a, "symlink")) return report(symlink("f", "sym"));
    if (!strcmp(a, "chmod")) return report(chmod("f", 0600));
    if (!strcmp(a, "mknod_fifo")) return report(mkfifo("fifo", 0600));
    if (!strcmp(a, "open_rdwr")) return report(open("f", O_RDWR));
    if (!strcmp(a, "read")) {
        char buf[16] = {0};
        int fd = open("f", O_RDONLY);
        if (fd < 0) return report(fd);
        long n = read(fd, buf, sizeof buf - 1);
        if (n >= 0 && strcmp(buf, "orig\n") != 0) { errno = EIO; n = -1; }
        return report(n);
    }
    if (!strcmp(a, "socket_inet")) return report(socket(AF_INET, SOCK_STREAM, 0));
    if (!strcmp(a, "socket_inet_raw")) return report(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP));
    if (!strcmp(a, "socket_netlink_route")) return report(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!strcmp(a, "socket_netlink_audit")) return report(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT));
    if (!strcmp(a, "socket_packet")) return report(socket(AF_PACKET, SOCK_RAW, 0));
    if (!strcmp(a, "unix_loopback")) return report(loopback(AF_UNIX));
    if (!strcmp(a, "tcp_loopback")) return report(loopback(AF_INET));
    if (!strcmp(a, "io_uring_setup")) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        return report(syscall(SYS_io_uring_setup, 4, &p));
    }
    if (!strcmp(a, "fork")) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid > 0) waitpid(pid, NULL, 0);
        return report(pid < 0 ? -1 : 0);
    }
    if (!strcmp(a, "execve")) {
        char *args[] = {"/bin/true", NULL};
        char *env[] = {NULL};
        return report(execve("/bin/true", args, env));
    }
    if (!strcmp(a, "thread")) {
        pthread_t t;
        int e = pthread_create(&t, NULL, thread_main, NULL);
        if (e) { errno = e; return report(-1); }
        pthread_join(t, NULL);
        return report(0);
    }
    if (!strcmp(a, "clone3")) return report(syscall(SYS_clone3, NULL, 0));
    if (!strcmp(a, "clone_newuser")) {
        /* a namespace flag on clone: raw syscall, child exits at once */
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid == 0) _exit(0);
        if (pid > 0) waitpid(pid, NULL, 0);
        return report(pid < 0 ? -1 : 0);
    }
    if (!strcmp(a, "tiocsti")) {
        int m = posix_openpt(O_RDWR | O_NOCTTY);
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) { printf("setup failed %s\n", ename(errno)); return 1; }
        char c = 'x';
        return report(ioctl(m, TIOCSTI, &c));
    }
    fprintf(stderr, "unknown action %s\n", a);
    return 2;
}
"#;

/// The probe, compiled once per source text: `<tmp>/sandbox-profiles-probe-<hash>/probe`, built
/// in a private directory and renamed into place, so concurrent test processes share it.
fn probe() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        PROBE_C.hash(&mut h);
        let dir = std::env::temp_dir().join(format!("sandbox-profiles-probe-{:016x}", h.finish()));
        let bin = dir.join("probe");
        if bin.is_file() {
            return bin;
        }
        let work =
            std::env::temp_dir().join(format!("sandbox-profiles-build-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let src = work.join("probe.c");
        std::fs::write(&src, PROBE_C).unwrap();
        let out = Command::new("gcc")
            .args(["-O1", "-Wall", "-o"])
            .arg(work.join("probe"))
            .arg(&src)
            .arg("-lpthread")
            .output()
            .expect("running gcc");
        assert!(
            out.status.success(),
            "gcc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Another process may have won the race; either copy is the same program.
        if std::fs::rename(&work, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&work);
        }
        assert!(bin.is_file(), "{} missing", bin.display());
        bin
    })
}

fn so() -> PathBuf {
    xtask::matrix::preload().expect("building libsandbox.so")
}

/// A scratch directory with `f` ("orig\n", mode 0644) and an empty directory `d`.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sandbox-profiles-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("f"), "orig\n").unwrap();
        std::fs::set_permissions(dir.join("f"), std::fs::Permissions::from_mode(0o644)).unwrap();
        Scratch(dir)
    }

    /// Every entry with its type, mode, size and content.
    fn state(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        for e in std::fs::read_dir(&self.0).unwrap() {
            let e = e.unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let content = if meta.is_file() {
                std::fs::read_to_string(e.path()).unwrap_or_default()
            } else {
                String::new()
            };
            m.insert(
                e.file_name().to_string_lossy().into_owned(),
                format!(
                    "{:?} {:o} {} {content:?}",
                    meta.file_type(),
                    meta.permissions().mode(),
                    meta.len()
                ),
            );
        }
        m
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one probe run did.
#[derive(Debug)]
struct Run {
    /// `ok N`, `err ENAME`, or empty when the process died.
    result: String,
    /// The syscall the preload's handler named, if the process was stopped.
    blocked: Option<String>,
    signal: Option<i32>,
    stderr: String,
}

fn run(profile: &str, action: &str, dir: &Path) -> Run {
    let mut cmd = Command::new(probe());
    cmd.arg(action).current_dir(dir).stdin(Stdio::null());
    let env = Profile::builtin(profile).unwrap().env(Some(Action::Trap));
    if !env.is_empty() {
        cmd.env("LD_PRELOAD", so())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    }
    let out = cmd.output().expect("running the probe");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let blocked = stderr
        .split("libsandbox: blocked syscall ")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        });
    Run {
        result: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        blocked,
        signal: out.status.signal(),
        stderr,
    }
}

/// Runs `action` under `profile` in a fresh scratch directory; returns the run and whether the
/// directory changed.
fn attempt(profile: &str, action: &str) -> (Run, bool) {
    let s = Scratch::new();
    let before = s.state();
    let r = run(profile, action, &s.0);
    let changed = s.state() != before;
    (r, changed)
}

fn assert_blocked(profile: &str, action: &str, syscall: &str) {
    let (r, changed) = attempt(profile, action);
    assert_eq!(
        r.blocked.as_deref(),
        Some(syscall),
        "{action} under {profile}: {r:?}"
    );
    assert_eq!(
        r.signal,
        Some(libc::SIGSYS),
        "{action} under {profile}: {r:?}"
    );
    assert!(
        r.result.is_empty(),
        "{action} under {profile} returned: {r:?}"
    );
    assert!(!changed, "{action} under {profile} changed the directory");
}

fn assert_result(profile: &str, action: &str, want: &str) {
    let (r, _) = attempt(profile, action);
    assert!(
        r.result.starts_with(want),
        "{action} under {profile}: want {want}, got {r:?}"
    );
    assert_eq!(r.blocked, None, "{action} under {profile}: {r:?}");
}

const FILE_CHANGES: &[&str] = &[
    "open_wronly",
    "open_creat",
    "open_trunc",
    "open_append",
    "raw_open_creat",
    "openat_tmpfile",
    "creat",
    "truncate",
    "ftruncate",
    "rename",
    "unlink",
    "rmdir",
    "mkdir",
    "link",
    "symlink",
    "chmod",
    "mknod_fifo",
];

/// Actions whose success is visible in the directory (opening to write is not, by itself).
const VISIBLE: &[&str] = &[
    "open_creat",
    "open_trunc",
    "raw_open_creat",
    "creat",
    "truncate",
    "ftruncate",
    "rename",
    "unlink",
    "rmdir",
    "mkdir",
    "link",
    "symlink",
    "chmod",
    "mknod_fifo",
];

#[test]
fn minimal_and_network_refuse_file_changes_with_erofs_and_change_nothing() {
    for profile in ["minimal", "network"] {
        for action in FILE_CHANGES {
            let (r, changed) = attempt(profile, action);
            assert_eq!(r.result, "err EROFS", "{action} under {profile}: {r:?}");
            assert!(!changed, "{action} under {profile} changed the directory");
        }
    }
}

#[test]
fn without_a_filter_the_same_attempts_succeed_and_change_the_directory() {
    for action in FILE_CHANGES {
        let (r, changed) = attempt("unrestricted", action);
        assert!(r.result.starts_with("ok"), "{action} unrestricted: {r:?}");
        assert_eq!(
            changed,
            VISIBLE.contains(action),
            "{action} unrestricted: change not seen"
        );
    }
}

#[test]
fn write_profiles_allow_file_changes() {
    for profile in ["write", "no-exec", "shell"] {
        for action in FILE_CHANGES {
            let (r, changed) = attempt(profile, action);
            assert!(
                r.result.starts_with("ok"),
                "{action} under {profile}: {r:?}"
            );
            assert_eq!(
                changed,
                VISIBLE.contains(action),
                "{action} under {profile}"
            );
        }
    }
}

#[test]
fn minimal_reads_and_keeps_the_rdwr_gap() {
    assert_result("minimal", "read", "ok 5");
    // The documented gap: opening an existing file read-write works (git opens /dev/null so).
    assert_result("minimal", "open_rdwr", "ok");
}

#[test]
fn minimal_blocks_inet_sockets_fork_and_execve() {
    assert_blocked("minimal", "socket_inet", "socket");
    assert_blocked("minimal", "fork", "clone");
    assert_blocked("minimal", "execve", "execve");
    assert_blocked("minimal", "tcp_loopback", "socket");
}

#[test]
fn minimal_threads_work_and_clone3_says_enosys() {
    assert_result("minimal", "thread", "ok 0");
    assert_result("minimal", "clone3", "err ENOSYS");
}

#[test]
fn network_unix_and_tcp_loopback_work() {
    assert_result("network", "unix_loopback", "ok 0");
    assert_result("network", "tcp_loopback", "ok 0");
    assert_result("network", "socket_netlink_route", "ok");
    assert_result("network", "thread", "ok 0");
}

#[test]
fn network_blocks_other_families_raw_sockets_io_uring_and_processes() {
    assert_blocked("network", "socket_netlink_audit", "socket");
    assert_blocked("network", "socket_packet", "socket");
    assert_blocked("network", "socket_inet_raw", "socket");
    assert_blocked("network", "io_uring_setup", "io_uring_setup");
    assert_blocked("network", "fork", "clone");
    assert_blocked("network", "execve", "execve");
}

#[test]
fn every_filtered_profile_blocks_io_uring_and_namespace_clones() {
    for profile in [
        "minimal",
        "network",
        "write",
        "no-exec",
        "shell",
        "shell-network",
    ] {
        assert_blocked(profile, "io_uring_setup", "io_uring_setup");
        assert_blocked(profile, "clone_newuser", "clone");
    }
}

#[test]
fn no_exec_blocks_fork_and_exec_but_not_threads() {
    assert_blocked("no-exec", "fork", "clone");
    assert_blocked("no-exec", "execve", "execve");
    assert_result("no-exec", "thread", "ok 0");
    assert_result("no-exec", "tcp_loopback", "ok 0");
}

#[test]
fn shell_allows_fork_and_exec_but_no_inet_socket() {
    assert_result("shell", "fork", "ok 0");
    let (r, _) = attempt("shell", "execve");
    assert!(
        r.blocked.is_none() && r.signal.is_none() && r.result.is_empty(),
        "{r:?}"
    );
    assert_blocked("shell", "socket_inet", "socket");
}

#[test]
fn shell_network_allows_processes_exec_and_tcp_but_not_raw_or_packet_sockets() {
    assert_result("shell-network", "fork", "ok 0");
    let (r, _) = attempt("shell-network", "execve");
    assert!(
        r.blocked.is_none() && r.signal.is_none() && r.result.is_empty(),
        "{r:?}"
    );
    assert_result("shell-network", "tcp_loopback", "ok 0");
    // Control: the same TCP connection under shell stops the program.
    assert_blocked("shell", "socket_inet", "socket");
    assert_blocked("shell-network", "socket_netlink_audit", "socket");
    assert_blocked("shell-network", "socket_packet", "socket");
    assert_blocked("shell-network", "socket_inet_raw", "socket");
}

#[test]
fn tiocsti_is_refused_under_every_filtered_profile() {
    for profile in [
        "minimal",
        "network",
        "write",
        "no-exec",
        "shell",
        "shell-network",
    ] {
        let (r, _) = attempt(profile, "tiocsti");
        assert_eq!(r.result, "err EPERM", "TIOCSTI under {profile}: {r:?}");
    }
    // Control: without a filter, root may inject into its own pseudo-terminal (unless the
    // kernel's legacy_tiocsti switch is off), so the EPERM above is the filter's.
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_default();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && legacy.trim() != "0" {
        let (r, _) = attempt("unrestricted", "tiocsti");
        assert_eq!(r.result, "ok 0", "TIOCSTI unrestricted: {r:?}");
    }
}

#[test]
fn the_probe_reports_unknown_actions() {
    let (r, _) = attempt("unrestricted", "no_such_action");
    assert!(r.stderr.contains("unknown action"), "{r:?}");
}
