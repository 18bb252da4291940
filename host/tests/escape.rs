//! The escape suite: small attack programs, compiled with gcc once per test binary, each run
//! under the profiles it targets through **every runner** — `sandbox run`, `sandbox exec
//! --json`, one long-lived `sandbox serve`, and the library's `sandbox_host::exec::exec` — each
//! asserting that the attack's *effect* did not happen (a file not created, a connection or
//! datagram not received by a listener the test runs, a program not started, another process's
//! memory unchanged, a terminal's input queue empty, a signal not delivered) and that the run
//! was confined as planned. A runner that misses a layer fails here. The runners of one test
//! run in parallel threads (each with its own listeners, victims and directories).
//!
//! Every attack also runs once unsandboxed and must have its effect there: a test that cannot
//! fail proves nothing. Programs that exist in both forms run as a dynamic glibc program and as
//! a static one under `--static-binary confine` (`"static_binary": "confine"`). Refused calls
//! end the program (`--on-violation kill`, `"on_violation": "kill"`), so each row says where
//! the attack was stopped.
//!
//! `ESCAPE_TABLE=/some/file cargo test -p sandbox-host --test escape` appends one Markdown row
//! per sandboxed run (attack, profile, variant, runner, outcome) to that file: the source of
//! the table in `docs/security.md`, whose rows are named like these tests.

use sandbox_host::exec::{self, OnViolation, Request};
use sandbox_host::StaticBinaryAction;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The `sandbox` binary under test: this build's, or the one `SANDBOX_TEST_BINARY` names (CI
/// runs the suite a second time against the release bundle's static binary).
fn sandbox_binary() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("SANDBOX_TEST_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_sandbox").to_string())
    })
}

/// Every attack, one mode per attack (see the comment at its top).
const ATTACK_C: &str = r#"/* Escape attempts for the sandbox's escape suite: one mode per attack. Every result is
 * written unbuffered to stdout ("name: ret=R errno=E"); an effect the test looks for is
 * either outside the process (a file, a connection, another process's memory, a tty's input
 * queue) or a line only a started process could print ("EXECED", "CHILD RAN", "REEXEC"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

static void say(const char *what, long ret) {
    if (ret < 0) printf("%s: ret=%ld errno=%d\n", what, ret, errno);
    else printf("%s: ret=%ld\n", what, ret);
}

static struct sockaddr_in local(int port) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

static int tcp_connect(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    say("socket", s);
    if (s < 0) return 1;
    struct sockaddr_in sa = local(port);
    int r = connect(s, (struct sockaddr *)&sa, sizeof sa);
    say("connect", r);
    return r != 0;
}

/* ---- io_uring without liburing ---- */
struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = syscall(__NR_io_uring_setup, 4, &p);
    say("io_uring_setup", r->fd);
    if (r->fd < 0) return -1;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED) { say("io_uring mmap", -1); return -1; }
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
}

/* Submits one request and returns its result (a negative errno on failure). */
static int ring_do(struct ring *r, const struct io_uring_sqe *sqe) {
    unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
    r->sqes[idx] = *sqe;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    long n = syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
    if (n < 0) return -errno;
    unsigned head = __atomic_load_n(r->cq_head, __ATOMIC_ACQUIRE);
    int res = r->cqes[head & *r->cq_mask].res;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

static int uring(const char *create, int port, const char *readme) {
    struct ring r;
    if (ring_init(&r)) return 1;
    struct io_uring_sqe sqe;
    memset(&sqe, 0, sizeof sqe);
    sqe.opcode = IORING_OP_OPENAT;
    sqe.fd = AT_FDCWD;
    sqe.addr = (uintptr_t)create;
    sqe.len = 0644;
    sqe.open_flags = O_CREAT | O_WRONLY;
    printf("uring openat(O_CREAT): res=%d\n", ring_do(&r, &sqe));
    memset(&sqe, 0, sizeof sqe);
    sqe.opcode = IORING_OP_SOCKET;
    sqe.fd = AF_INET;
    sqe.off = SOCK_STREAM;
    int s = ring_do(&r, &sqe);
    printf("uring socket: res=%d\n", s);
    struct sockaddr_in sa = local(port);
    memset(&sqe, 0, sizeof sqe);
    sqe.opcode = IORING_OP_CONNECT;
    sqe.fd = s;
    sqe.addr = (uintptr_t)&sa;
    sqe.off = sizeof sa;
    printf("uring connect: res=%d\n", ring_do(&r, &sqe));
    int fd = open(readme, O_RDONLY);
    static char buf[256];
    memset(&sqe, 0, sizeof sqe);
    sqe.opcode = IORING_OP_READ;
    sqe.fd = fd;
    sqe.addr = (uintptr_t)buf;
    sqe.len = sizeof buf - 1;
    int n = ring_do(&r, &sqe);
    printf("uring read: res=%d\n", n);
    if (n > 0) printf("URING-READ %s\n", buf);
    return 0;
}

/* A UDP datagram through a raw socket: the kernel adds the IP header, we write the UDP one. */
static int raw_udp(int port) {
    int s = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
    say("socket(SOCK_RAW)", s);
    if (s < 0) return 1;
    unsigned char pkt[8 + 3] = {0x30, 0x39, (unsigned char)(port >> 8), (unsigned char)port, 0, 11, 0, 0, 'R', 'A', 'W'};
    struct sockaddr_in sa = local(0);
    say("sendto", sendto(s, pkt, sizeof pkt, 0, (struct sockaddr *)&sa, sizeof sa));
    return 0;
}

static int touch(const char *marker) {
    printf("EXECED\n");
    int fd = open(marker, O_CREAT | O_WRONLY, 0644);
    say("open(marker)", fd);
    return 0;
}

static void self_path(char *buf, size_t len) {
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    buf[n < 0 ? 0 : n] = 0;
}

static int child_ran(void *arg) {
    (void)arg;
    printf("CHILD RAN\n");
    _exit(0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) return 2;
    const char *m = argv[1];
    const char *a = argc > 2 ? argv[2] : "";
    const char *b = argc > 3 ? argv[3] : "";
    const char *c = argc > 4 ? argv[4] : "";
    if (!strcmp(m, "touch")) return touch(a);
    if (!strcmp(m, "connect")) return tcp_connect(atoi(a));
    if (!strcmp(m, "raw-udp")) return raw_udp(atoi(a));
    if (!strcmp(m, "uring")) return uring(a, atoi(b), c);
    if (!strcmp(m, "int80")) {
        /* i386 creat(8) through the 32-bit entry point; the path must sit below 4 GiB. */
        char *low = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        strcpy(low, a);
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(8), "b"(low), "c"(0644) : "memory");
        printf("int80 creat: ret=%ld\n", r);
        return 0;
    }
    if (!strcmp(m, "x32")) {
        say("x32 creat", syscall(0x40000000 | SYS_creat, a, 0644));
        return 0;
    }
    if (!strcmp(m, "execve") || !strcmp(m, "execveat")) {
        char self[4096];
        self_path(self, sizeof self);
        char *args[] = {self, "touch", (char *)a, NULL};
        long r = !strcmp(m, "execve") ? execve(self, args, environ)
                                      : syscall(SYS_execveat, AT_FDCWD, self, args, environ, 0);
        say(m, r);
        return 0;
    }
    if (!strcmp(m, "fork")) {
        pid_t p = fork();
        if (p == 0) child_ran(NULL);
        say("fork", p);
        if (p > 0) waitpid(p, NULL, 0);
        return 0;
    }
    if (!strcmp(m, "clone3")) {
        struct clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.exit_signal = SIGCHLD;
        long p = syscall(SYS_clone3, &ca, sizeof ca);
        if (p == 0) child_ran(NULL);
        say("clone3", p);
        if (p > 0) waitpid(p, NULL, 0);
        return 0;
    }
    if (!strcmp(m, "ptrace")) {
        pid_t pid = atoi(a);
        unsigned long addr = strtoul(b, NULL, 0);
        long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
        say("ptrace(ATTACH)", r);
        if (r) return 1;
        waitpid(pid, NULL, __WALL);
        say("ptrace(POKEDATA)", ptrace(PTRACE_POKEDATA, pid, addr, 666));
        say("ptrace(DETACH)", ptrace(PTRACE_DETACH, pid, 0, 0));
        return 0;
    }
    if (!strcmp(m, "vm-write")) {
        long v = 666;
        struct iovec l = {&v, sizeof v}, r = {(void *)strtoul(b, NULL, 0), sizeof v};
        say("process_vm_writev", syscall(SYS_process_vm_writev, atoi(a), &l, 1, &r, 1, 0));
        return 0;
    }
    if (!strcmp(m, "memfd-exec")) {
        int fd = syscall(SYS_memfd_create, "x", 0);
        say("memfd_create", fd);
        if (fd < 0) return 1;
        int in = open("/proc/self/exe", O_RDONLY);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0) write(fd, buf, n);
        char *args[] = {"memfd", "touch", (char *)a, NULL};
        say("execveat(memfd)", syscall(SYS_execveat, fd, "", args, environ, AT_EMPTY_PATH));
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        say("execve(/proc/self/fd)", execve(path, args, environ));
        return 0;
    }
    if (!strcmp(m, "tiocsti")) {
        /* Types a command into the terminal at path A (stdin when none), as if the user had. */
        int tty = 0;
        if (*a) {
            tty = open(a, O_RDONLY | O_NOCTTY);
            if (tty < 0) { say("open(tty)", tty); return 1; }
        }
        for (const char *p = "INJECTED\n"; *p; p++) {
            int r = ioctl(tty, TIOCSTI, p);
            if (r) { say("ioctl(TIOCSTI)", r); return 1; }
        }
        say("ioctl(TIOCSTI)", 0);
        return 0;
    }
    if (!strcmp(m, "openat2")) {
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = O_CREAT | O_WRONLY;
        how.mode = 0644;
        say("openat2", syscall(SYS_openat2, AT_FDCWD, a, &how, sizeof how));
        return 0;
    }
    if (!strcmp(m, "creat")) { say("creat", creat(a, 0644)); return 0; }
    if (!strcmp(m, "rename")) { say("rename", rename(a, b)); return 0; }
    if (!strcmp(m, "linkat")) { say("linkat", linkat(AT_FDCWD, a, AT_FDCWD, b, 0)); return 0; }
    if (!strcmp(m, "reexec-empty-preload") || !strcmp(m, "reexec-clearenv")) {
        char self[4096];
        self_path(self, sizeof self);
        char *args[] = {self, "stage2", (char *)a, NULL};
        if (!strcmp(m, "reexec-clearenv")) clearenv();
        else setenv("LD_PRELOAD", "", 1);
        say("execve(self)", execve(self, args, environ));
        return 0;
    }
    if (!strcmp(m, "stage2")) {
        printf("REEXEC LD_PRELOAD=%s\n", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
        return tcp_connect(atoi(a));
    }
    if (!strcmp(m, "signal")) {
        /* kill or tgkill (A) aimed at process B with signal C. */
        int pid = atoi(b), sig = atoi(c);
        if (!strcmp(a, "kill")) say("kill", kill(pid, sig));
        else say("tgkill", syscall(SYS_tgkill, pid, pid, sig));
        return 0;
    }
    if (!strcmp(m, "procmem")) {
        /* Writes 666 into process A's memory at address B through /proc/A/mem. */
        char path[64];
        snprintf(path, sizeof path, "/proc/%s/mem", a);
        int fd = open(path, O_RDWR);
        say("open(/proc/PID/mem, O_RDWR)", fd);
        if (fd < 0) return 0;
        long v = 666;
        say("pwrite(/proc/PID/mem)", pwrite(fd, &v, sizeof v, (off_t)strtoul(b, NULL, 0)));
        return 0;
    }
    if (!strcmp(m, "environ")) {
        /* Prints process A's environment, as an attacker collecting its secrets would. */
        char path[64];
        snprintf(path, sizeof path, "/proc/%s/environ", a);
        int fd = open(path, O_RDONLY);
        say("open(/proc/PID/environ)", fd);
        if (fd < 0) return 0;
        static char buf[65536];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        say("read(/proc/PID/environ)", n);
        for (ssize_t i = 0; i < n; i++) if (!buf[i]) buf[i] = ' ';
        if (n > 0) { buf[n] = 0; printf("ENVIRON %s\n", buf); }
        return 0;
    }
    if (!strcmp(m, "open-rw")) {
        /* Opens file A for writing without writing: the capability is the effect. */
        say("open(O_RDWR)", open(a, O_RDWR));
        return 0;
    }
    if (!strcmp(m, "daemon") || !strcmp(m, "daemon-stay")) {
        /* Leaves a double-forked process in its own session behind (argv carries the test's
         * mark); with daemon-stay the program itself then waits forever. */
        pid_t p = fork();
        say("fork", p);
        if (p == 0) {
            say("setsid", setsid());
            if (fork() == 0) {
                /* A daemon closes its streams: nobody waits for it through a pipe. */
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0);
                dup2(null, 1);
                dup2(null, 2);
                for (;;) pause();
            }
            _exit(0);
        }
        if (p > 0) waitpid(p, NULL, 0);
        printf("DAEMON LEFT\n");
        if (!strcmp(m, "daemon-stay")) for (;;) pause();
        return 0;
    }
    if (!strcmp(m, "forks")) {
        /* Starts up to A processes that wait forever, says how many it got, then ends them. */
        int n = atoi(a), made = 0;
        static pid_t kids[8192];
        for (int i = 0; i < n && i < 8192; i++) {
            pid_t p = fork();
            if (p == 0) { for (;;) pause(); }
            if (p < 0) { say("fork", p); break; }
            kids[made++] = p;
        }
        printf("FORKED %d\n", made);
        for (int i = 0; i < made; i++) kill(kids[i], SIGKILL);
        for (int i = 0; i < made; i++) waitpid(kids[i], NULL, 0);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", m);
    return 2;
}
"#;

/// The process whose memory the ptrace and process_vm_writev attacks try to change.
const VICTIM_C: &str = r#"/* Holds a value in memory, prints its pid and the value's address, waits for a line on
 * stdin, then prints the value: the target of the ptrace and process_vm_writev attacks. */
#include <stdio.h>
#include <unistd.h>
volatile long value = 42;
int main(void) {
    printf("%d %p\n", (int)getpid(), (void *)&value);
    fflush(stdout);
    char c;
    while (read(0, &c, 1) < 0) {}
    printf("%ld\n", value);
    return 0;
}
"#;

/// A dynamic program with no library to load, for the descriptor-exhaustion attack.
const FDFULL_C: &str = r#"/* Dynamic (it has an interpreter, so the host plans a preload) but needs no library: with
 * every descriptor below the limit open at exec, ld.so cannot open the preload, says
 * "cannot be preloaded ... ignored" and runs it. It frees descriptor 0, then connects to
 * 127.0.0.1:PORT with raw syscalls and exits 0 only if the connection was made. */
static long sys(long n, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
static void say(const char *s) {
    long n = 0;
    while (s[n]) n++;
    sys(1, 1, (long)s, n);
}
__asm__(".globl _start\n_start:\n mov %rsp, %rdi\n and $-16, %rsp\n call start\n hlt\n");
void start(long *sp) {
    char **argv = (char **)(sp + 1);
    long port = 0;
    for (const char *p = argv[1]; p && *p; p++) port = port * 10 + (*p - '0');
    sys(3, 0, 0, 0); /* close(0) */
    long s = sys(41, 2, 1, 0); /* socket(AF_INET, SOCK_STREAM, 0) */
    if (s < 0) { say("socket failed\n"); sys(60, 1, 0, 0); }
    say("socket opened\n");
    unsigned char sa[16] = {2, 0, (unsigned char)(port >> 8), (unsigned char)port, 127, 0, 0, 1};
    long r = sys(42, s, (long)sa, 16); /* connect */
    say(r == 0 ? "connected\n" : "connect failed\n");
    sys(60, r == 0 ? 0 : 1, 0, 0);
}
"#;

/// Routes a descriptor's I/O signal to a process the attacker did not start: it names `PID` the
/// owner of a pipe's read end (fcntl F_SETOWN, F_SETOWN_EX, or ioctl FIOSETOWN), picks the
/// signal (F_SETSIG SIGTERM; the ioctl form keeps SIGIO, which also terminates), turns on
/// O_ASYNC and writes to the pipe: the kernel sends the signal to the owner.
const SIGROUTE_C: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void say(const char *what, long ret) {
    printf("%s: ret=%ld errno=%d\n", what, ret, ret < 0 ? errno : 0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 3) return 2;
    int pid = atoi(argv[2]);
    int p[2];
    if (pipe(p)) return 3;
    if (!strcmp(argv[1], "fcntl")) {
        say("fcntl(F_SETOWN)", fcntl(p[0], F_SETOWN, pid));
        say("fcntl(F_SETSIG)", fcntl(p[0], F_SETSIG, SIGTERM));
    } else if (!strcmp(argv[1], "fcntl-ex")) {
        struct f_owner_ex o = {F_OWNER_PID, pid};
        say("fcntl(F_SETOWN_EX)", fcntl(p[0], F_SETOWN_EX, &o));
        say("fcntl(F_SETSIG)", fcntl(p[0], F_SETSIG, SIGTERM));
    } else if (!strcmp(argv[1], "ioctl")) {
        /* FIOSETOWN applies to sockets: the pipe is replaced by a Unix socket pair. */
        close(p[0]);
        close(p[1]);
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, p)) { say("socketpair", -1); return 3; }
        say("ioctl(FIOSETOWN)", ioctl(p[0], FIOSETOWN, &pid));
    } else {
        return 2;
    }
    say("fcntl(F_SETFL O_ASYNC)", fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK));
    say("write", write(p[1], "x", 1));
    return 0;
}
"#;

/// How an attack program was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// A glibc dynamic program.
    Dynamic,
    /// `gcc -static`: no loader, run under `--static-binary confine`.
    Static,
}

const BOTH: [Variant; 2] = [Variant::Dynamic, Variant::Static];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Dynamic => "dynamic",
            Variant::Static => "static",
        }
    }
}

/// Compiles `source` with gcc (`flags` first) into `dir/name`; panics with gcc's output.
fn gcc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let res = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gcc ({e}); install it: apt-get install gcc"));
    assert!(
        res.status.success(),
        "gcc {} {name}.c failed (static programs need libc6-dev):\n{}",
        flags.join(" "),
        String::from_utf8_lossy(&res.stderr)
    );
    out
}

/// The compiled programs, built once per test binary, in a directory every uid can read.
struct Programs {
    _dir: tempfile::TempDir,
    dynamic: PathBuf,
    static_: PathBuf,
    victim: PathBuf,
    fdfull: PathBuf,
    sigroute: PathBuf,
    sigroute_static: PathBuf,
}

fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("escape").tempdir().unwrap();
        let d = dir.path();
        Programs {
            dynamic: gcc(d, "attack", ATTACK_C, &[]),
            static_: gcc(d, "attack-static", ATTACK_C, &["-static"]),
            victim: gcc(d, "victim", VICTIM_C, &[]),
            fdfull: gcc(
                d,
                "fdfull",
                FDFULL_C,
                &["-nostdlib", "-fno-stack-protector", "-O1"],
            ),
            sigroute: gcc(d, "sigroute", SIGROUTE_C, &[]),
            sigroute_static: gcc(d, "sigroute-static", SIGROUTE_C, &["-static"]),
            _dir: dir,
        }
    })
}

fn attack(v: Variant) -> &'static Path {
    match v {
        Variant::Dynamic => &programs().dynamic,
        Variant::Static => &programs().static_,
    }
}

/// A way into the sandbox's engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runner {
    /// `sandbox run` in a bare environment (PATH, HOME, LANG), stdin `/dev/null`.
    Run,
    /// One `sandbox exec --json` per request.
    ExecJson,
    /// One `sandbox serve` per test binary, fed JSON lines with ids.
    Serve,
    /// `sandbox_host::exec::exec` in this process.
    Library,
}

const RUNNERS: [Runner; 4] = [
    Runner::Run,
    Runner::ExecJson,
    Runner::Serve,
    Runner::Library,
];

impl Runner {
    fn name(self) -> &'static str {
        match self {
            Runner::Run => "run",
            Runner::ExecJson => "exec --json",
            Runner::Serve => "serve",
            Runner::Library => "library",
        }
    }
}

/// Runs `body` once per runner, each in a thread named after it (a failure's message names
/// the runner); fails listing the runners whose run failed.
fn every_runner(body: impl Fn(Runner) + Sync) {
    let body = &body;
    let failed: Vec<&str> = std::thread::scope(|s| {
        let threads: Vec<_> = RUNNERS
            .iter()
            .map(|&r| {
                let t = std::thread::Builder::new()
                    .name(r.name().to_string())
                    .spawn_scoped(s, move || body(r))
                    .unwrap();
                (r, t)
            })
            .collect();
        threads
            .into_iter()
            .filter_map(|(r, t)| t.join().is_err().then_some(r.name()))
            .collect()
    });
    assert!(failed.is_empty(), "failed through: {}", failed.join(", "));
}

/// One sandboxed run: a program and its arguments under a profile.
struct Job<'a> {
    profile: &'a str,
    variant: Variant,
    prog: &'a Path,
    args: Vec<String>,
    /// A descriptor limit: the request's `limits.nofile`, or for `sandbox run` (which passes
    /// its own limit on) the host's soft limit.
    nofile: Option<u64>,
    /// The wall-clock limit, in seconds.
    timeout: u32,
}

impl<'a> Job<'a> {
    fn new(profile: &'a str, variant: Variant, prog: &'a Path, args: &[&str]) -> Job<'a> {
        Job {
            profile,
            variant,
            prog,
            args: args.iter().map(|a| a.to_string()).collect(),
            nofile: None,
            timeout: 30,
        }
    }

    /// The request every JSON runner and the library get: refused calls kill, static programs
    /// are confined by the outer filter, 30 s at most.
    fn request(&self) -> Request {
        let mut r = Request::new(
            std::iter::once(path_str(self.prog).to_string()).chain(self.args.iter().cloned()),
        );
        r.profile = self.profile.to_string();
        r.on_violation = OnViolation::Kill;
        if self.variant == Variant::Static {
            r.static_binary = StaticBinaryAction::Confine;
        }
        r.timeout_s = self.timeout.into();
        r.limits.nofile = self.nofile;
        r
    }

    fn run(&self, runner: Runner) -> Ran {
        let ran = match runner {
            Runner::Run => self.run_cli(),
            Runner::ExecJson => {
                let line = serde_json::to_string(&self.request()).unwrap();
                let mut child = bare(Command::new(sandbox_binary()).args(["exec", "--json"]))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("sandbox exec --json");
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(line.as_bytes())
                    .unwrap();
                let out = child.wait_with_output().unwrap();
                let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                    panic!(
                        "exec --json printed no result ({e}; {}): {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    )
                });
                Ran::from_json(&v)
            }
            Runner::Serve => {
                let mut v = serde_json::to_value(self.request()).unwrap();
                Ran::from_json(&server().ask(&mut v))
            }
            Runner::Library => {
                let res = exec::exec(&self.request())
                    .unwrap_or_else(|e| panic!("the library refused it: {e}"));
                Ran {
                    code: res.exit_code,
                    signal: res.signal,
                    stdout: res.stdout,
                    stderr: res.stderr,
                    sandboxed: serde_json::to_value(res.sandboxed.filter)
                        .unwrap()
                        .as_str()
                        .map(String::from),
                }
            }
        };
        ran
    }

    /// `sandbox run --verbose` (its line `sandboxed: HOW` says how the run was confined).
    fn run_cli(&self) -> Ran {
        let mut cmd = Command::new(sandbox_binary());
        cmd.args(["run", "--profile", self.profile, "--on-violation", "kill"])
            .args([
                "--allow-root",
                "--verbose",
                "--timeout",
                &self.timeout.to_string(),
            ]);
        if self.variant == Variant::Static {
            cmd.args(["--static-binary", "confine"]);
        }
        cmd.arg("--").arg(self.prog).args(&self.args);
        bare(&mut cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(n) = self.nofile {
            // The host itself needs descriptors (pipes, the Landlock ruleset): with too few it
            // refuses with status 125, so its limit is at least 64.
            let n = n.max(64);
            // SAFETY: setrlimit is async-signal-safe; nothing is allocated.
            unsafe {
                cmd.pre_exec(move || soft_nofile(n as libc::rlim_t));
            }
        }
        let out = cmd.output().expect("sandbox run");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let sandboxed = stderr
            .lines()
            .find_map(|l| l.split_once("sandboxed: "))
            // `sandboxed: HOW, tier: ...`
            .map(|(_, how)| how.split(',').next().unwrap_or(how).trim().to_string());
        // `sandbox run` exits 128+N when signal N ended the program.
        let (code, signal) = match (out.status.code(), out.status.signal()) {
            (Some(c), _) if (129..=128 + 64).contains(&c) => (None, Some(c - 128)),
            (c, s) => (c, s),
        };
        Ran {
            code,
            signal,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            sandboxed,
        }
    }
}

/// An environment as agents give it: PATH, HOME and LANG only.
fn bare(cmd: &mut Command) -> &mut Command {
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(
            "HOME",
            std::env::var_os("HOME").unwrap_or_else(|| "/root".into()),
        )
        .env("LANG", "C.UTF-8")
}

/// One `sandbox serve` for the whole test binary: requests get ids, a reader thread hands each
/// result line to the request that waits for it. It exits when this process does (EOF).
struct Server {
    pid: u32,
    stdin: Mutex<ChildStdin>,
    waiting: Arc<Mutex<HashMap<String, Sender<Value>>>>,
    next: AtomicU64,
}

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        let mut child =
            bare(Command::new(sandbox_binary()).args(["serve", "--max-concurrent", "8"]))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("sandbox serve");
        let pid = child.id();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let waiting: Arc<Mutex<HashMap<String, Sender<Value>>>> = Arc::default();
        let w = waiting.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("serve wrote a line that is not JSON ({e}): {line}")
                });
                let id = v["id"].as_str().unwrap_or_default().to_string();
                if let Some(tx) = w.lock().unwrap().remove(&id) {
                    let _ = tx.send(v);
                }
            }
            // The server is gone: every waiting request fails at once.
            w.lock().unwrap().clear();
            let _ = child.wait();
        });
        Server {
            pid,
            stdin: Mutex::new(stdin),
            waiting,
            next: AtomicU64::new(0),
        }
    })
}

impl Server {
    /// Sends `request` with a fresh id and waits for its result line.
    fn ask(&self, request: &mut Value) -> Value {
        let id = format!("r{}", self.next.fetch_add(1, Ordering::Relaxed));
        request["id"] = Value::String(id.clone());
        let (tx, rx) = channel();
        self.waiting.lock().unwrap().insert(id, tx);
        let mut line = serde_json::to_vec(request).unwrap();
        line.push(b'\n');
        self.stdin
            .lock()
            .unwrap()
            .write_all(&line)
            .expect("writing to serve");
        rx.recv_timeout(Duration::from_secs(90))
            .expect("serve wrote no result for a request")
    }
}

/// What one run did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    /// How it was confined (`exact`, `outer-only`, `none`); `None` for an unsandboxed control.
    sandboxed: Option<String>,
}

impl Ran {
    /// A result object of `exec --json` or `serve`; an error object fails the test.
    fn from_json(v: &Value) -> Ran {
        assert!(v.get("error").is_none(), "refused: {v}");
        Ran {
            code: v["exit_code"].as_i64().map(|c| c as i32),
            signal: v["signal"].as_i64().map(|s| s as i32),
            stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
            stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
            sandboxed: v["sandboxed"]["filter"].as_str().map(String::from),
        }
    }

    fn success(&self) -> bool {
        self.code == Some(0)
    }

    fn killed_by_sigsys(&self) -> bool {
        self.signal == Some(libc::SIGSYS)
    }

    /// The outcome for the table: killed, or the errno the named call failed with.
    fn outcome(&self) -> String {
        if self.killed_by_sigsys() {
            return "killed (SIGSYS)".into();
        }
        let failed: Vec<String> = self
            .stdout
            .lines()
            .filter_map(|l| {
                let (call, rest) = l.split_once(": ")?;
                let e = rest.split_once("errno=")?.1.trim().parse::<i32>().ok()?;
                (e != 0).then(|| format!("{call}: {}", errno_name(e)))
            })
            .collect();
        match (failed.is_empty(), self.code, self.signal) {
            (false, _, _) => failed.join(", "),
            (true, Some(c), _) => format!("exit {c}"),
            (true, None, Some(s)) => format!("signal {s}"),
            (true, None, None) => "no status".into(),
        }
    }
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EPERM => "EPERM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EROFS => "EROFS".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EIO => "EIO".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::ESRCH => "ESRCH".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EAGAIN => "EAGAIN".into(),
        _ => format!("errno {e}"),
    }
}

/// Runs `prog args` unsandboxed (the control), with `setup` applied to the command first, and
/// kills it after 30 s.
fn control_with(prog: &Path, args: &[&str], setup: impl FnOnce(&mut Command)) -> Ran {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut cmd);
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            // SAFETY: kill has no memory preconditions; the child is not reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().expect("wait");
    let _ = tx.send(());
    watchdog.join().unwrap();
    Ran {
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        sandboxed: None,
    }
}

fn control(prog: &Path, args: &[&str]) -> Ran {
    control_with(prog, args, |_| {})
}

/// Runs one attack program under `profile` through `runner`, checks how it was confined, and
/// records the table row.
fn sandboxed(runner: Runner, attack_name: &str, profile: &str, v: Variant, args: &[&str]) -> Ran {
    let ran = Job::new(profile, v, attack(v), args).run(runner);
    check_and_record(runner, attack_name, profile, v.name(), ran)
}

/// Asserts the run was confined exactly (every built-in profile's outer filter is the profile,
/// for dynamic and static programs alike) and appends its row to `ESCAPE_TABLE` if set.
fn check_and_record(
    runner: Runner,
    attack_name: &str,
    profile: &str,
    variant: &str,
    ran: Ran,
) -> Ran {
    assert_eq!(
        ran.sandboxed.as_deref(),
        Some("exact"),
        "{attack_name} under {profile} ({variant}) through {}: {ran:?}",
        runner.name()
    );
    // A terminal user is told which call ended the program, or, for a kill in the kernel
    // that tells the host nothing (the architecture check), the signal without the filter
    // named: a program can raise SIGSYS itself.
    if runner == Runner::Run && ran.killed_by_sigsys() {
        assert!(
            ran.stderr.contains("was stopped by the filter")
                || ran.stderr.contains("was killed by signal 31 (SIGSYS)"),
            "{attack_name} under {profile} ({variant}): no line names the call: {ran:?}"
        );
    }
    if let Some(path) = std::env::var_os("ESCAPE_TABLE") {
        let row = format!(
            "| {attack_name} | {profile} | {variant} | {} | {} |\n",
            runner.name(),
            ran.outcome()
        );
        // One write per row on an O_APPEND file: rows of parallel runs never interleave.
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(row.as_bytes()).unwrap();
    }
    ran
}

/// A TCP listener on 127.0.0.1 that says whether anyone connected.
struct Listener(TcpListener);

impl Listener {
    fn new() -> Listener {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Listener(l)
    }

    fn port(&self) -> String {
        self.0.local_addr().unwrap().port().to_string()
    }

    /// How many connections arrived (call after the attacker exited: a completed connect
    /// waits in the backlog).
    fn connections(&self) -> usize {
        let mut n = 0;
        loop {
            match self.0.accept() {
                Ok(_) => n += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Owned strings as the `&str` slice the runners take.
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn tcp_connect_under_minimal() {
    let l = Listener::new();
    let control = control(attack(Variant::Dynamic), &["connect", &l.port()]);
    assert!(control.success(), "{control:?}");
    assert_eq!(l.connections(), 1, "the attack connects when unsandboxed");
    every_runner(|r| {
        let l = Listener::new();
        for v in BOTH {
            let ran = sandboxed(r, "TCP connect", "minimal", v, &["connect", &l.port()]);
            assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
            assert_eq!(l.connections(), 0, "{v:?}: {ran:?}");
        }
    });
}

/// A UDP socket on 127.0.0.1 and what it received.
struct Udp(UdpSocket);

impl Udp {
    fn new() -> Udp {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_nonblocking(true).unwrap();
        Udp(u)
    }

    fn port(&self) -> String {
        self.0.local_addr().unwrap().port().to_string()
    }

    fn received(&self) -> Option<Vec<u8>> {
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = [0u8; 64];
        match self.0.recv(&mut buf) {
            Ok(n) => Some(buf[..n].to_vec()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn raw_socket_under_minimal() {
    let u = Udp::new();
    let control = control(attack(Variant::Dynamic), &["raw-udp", &u.port()]);
    if is_root() {
        assert!(control.success(), "{control:?}");
        assert_eq!(
            u.received().as_deref(),
            Some(&b"RAW"[..]),
            "a raw socket delivers a datagram unsandboxed: {control:?}"
        );
    } else {
        // Raw sockets need CAP_NET_RAW: another uid is refused by the kernel already.
        let refused = format!("socket(SOCK_RAW): ret=-1 errno={}", libc::EPERM);
        assert!(control.stdout.contains(&refused), "{control:?}");
    }
    every_runner(|r| {
        let u = Udp::new();
        for v in BOTH {
            let ran = sandboxed(r, "raw socket", "minimal", v, &["raw-udp", &u.port()]);
            assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
            assert_eq!(u.received(), None, "{v:?}: {ran:?}");
        }
    });
}

#[test]
fn io_uring_reads_and_socket_ops_under_every_profile() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "SECRET").unwrap();
    let args = |p: &Path, l: &Listener| {
        vec![
            "uring".to_string(),
            path_str(p).into(),
            l.port(),
            path_str(&secret).into(),
        ]
    };
    let l = Listener::new();
    let created = dir.path().join("control");
    let control = control(attack(Variant::Dynamic), &strs(&args(&created, &l)));
    assert!(
        created.exists(),
        "io_uring creates a file unsandboxed: {control:?}"
    );
    assert_eq!(
        l.connections(),
        1,
        "io_uring connects unsandboxed: {control:?}"
    );
    assert!(control.stdout.contains("URING-READ SECRET"), "{control:?}");
    every_runner(|r| {
        let l = Listener::new();
        for profile in [
            "minimal",
            "network",
            "write",
            "no-exec",
            "shell",
            "shell-network",
        ] {
            for v in BOTH {
                let created = dir
                    .path()
                    .join(format!("{profile}-{}-{}", v.name(), r.name()));
                let ran = sandboxed(r, "io_uring", profile, v, &strs(&args(&created, &l)));
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert!(
                    !ran.stdout.contains("io_uring_setup: ret="),
                    "io_uring_setup never returns: {ran:?}"
                );
                assert!(!created.exists(), "{profile} {v:?}");
                assert_eq!(l.connections(), 0, "{profile} {v:?}");
                assert!(!ran.stdout.contains("SECRET"), "{profile} {v:?}");
            }
        }
    });
}

/// A creat through another ABI's entry point (`mode`): it must kill under `minimal` and under
/// `shell`, which allows `creat` itself, so only the architecture check can stop it there.
fn other_abi_attack(attack_name: &str, mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    every_runner(|r| {
        for profile in ["minimal", "shell"] {
            for v in BOTH {
                let created = dir
                    .path()
                    .join(format!("{profile}-{}-{}", v.name(), r.name()));
                let ran = sandboxed(r, attack_name, profile, v, &[mode, path_str(&created)]);
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert!(!created.exists(), "{profile} {v:?}");
            }
        }
    });
}

#[test]
fn int80_from_a_64_bit_program() {
    let dir = tempfile::tempdir().unwrap();
    let created = dir.path().join("control");
    let control = control(attack(Variant::Dynamic), &["int80", path_str(&created)]);
    assert!(
        created.exists(),
        "int 0x80 creat works unsandboxed: {control:?}"
    );
    other_abi_attack("int 0x80 (i386 creat)", "int80");
}

#[test]
fn x32_numbered_syscalls() {
    let dir = tempfile::tempdir().unwrap();
    let created = dir.path().join("control");
    let control = control(attack(Variant::Dynamic), &["x32", path_str(&created)]);
    // This kernel has no x32 ABI (CONFIG_X86_X32_ABI unset): unsandboxed the call fails with
    // ENOSYS and the program goes on; a kernel with x32 creates the file. Either way it is
    // not killed, so a kill below is the filter's doing.
    assert!(control.success(), "{control:?}");
    assert!(
        created.exists() || control.stdout.contains(&format!("errno={}", libc::ENOSYS)),
        "{control:?}"
    );
    other_abi_attack("x32 syscall (creat + 0x40000000)", "x32");
}

/// Runs an exec attack (`execve`, `execveat`, `memfd-exec`): the exec'd copy would print
/// `EXECED` and create the marker.
fn exec_attack(attack_name: &str, mode: &str, profiles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for v in BOTH {
        let marker = dir.path().join(format!("control-{}", v.name()));
        let control = control(attack(v), &[mode, path_str(&marker)]);
        assert!(
            control.stdout.contains("EXECED") && marker.exists(),
            "{mode} works unsandboxed: {control:?}"
        );
    }
    every_runner(|r| {
        for profile in profiles {
            for v in BOTH {
                let marker = dir
                    .path()
                    .join(format!("{profile}-{}-{}", v.name(), r.name()));
                let ran = sandboxed(r, attack_name, profile, v, &[mode, path_str(&marker)]);
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert!(!ran.stdout.contains("EXECED"), "{profile} {v:?}: {ran:?}");
                assert!(!marker.exists(), "{profile} {v:?}");
            }
        }
    });
}

#[test]
fn execve_after_start_under_no_exec() {
    exec_attack("execve after start", "execve", &["no-exec", "minimal"]);
}

#[test]
fn execveat_after_start_under_no_exec() {
    exec_attack("execveat after start", "execveat", &["no-exec", "minimal"]);
}

#[test]
fn memfd_create_then_exec() {
    exec_attack(
        "memfd_create then exec",
        "memfd-exec",
        &["no-exec", "minimal"],
    );
}

fn spawn_attack(mode: &str, attack_name: &str, killed: bool) {
    let control = control(attack(Variant::Dynamic), &[mode]);
    assert!(
        control.stdout.contains("CHILD RAN"),
        "{mode} starts a process unsandboxed: {control:?}"
    );
    every_runner(|r| {
        for v in BOTH {
            let ran = sandboxed(r, attack_name, "minimal", v, &[mode]);
            assert!(!ran.stdout.contains("CHILD RAN"), "{v:?}: {ran:?}");
            if killed {
                assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
            } else {
                assert!(
                    ran.stdout
                        .contains(&format!("{mode}: ret=-1 errno={}", libc::ENOSYS)),
                    "{v:?}: {ran:?}"
                );
            }
        }
    });
}

#[test]
fn fork_under_minimal() {
    spawn_attack("fork", "fork", true);
}

#[test]
fn clone3_under_minimal() {
    // clone3's flags live in memory a filter cannot read: it answers ENOSYS, so libc falls
    // back to clone, whose flags are checked.
    spawn_attack("clone3", "clone3", false);
}

/// A running victim: its pid, the address of its value, and a way to read the value back.
struct Victim {
    child: std::process::Child,
    pid: String,
    addr: String,
}

impl Victim {
    fn start() -> Victim {
        let mut child = Command::new(&programs().victim)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let (pid, addr) = line.trim().split_once(' ').unwrap();
        let (pid, addr) = (pid.to_string(), addr.to_string());
        Victim { child, pid, addr }
    }

    /// Lets the victim print its value and exit; returns the value.
    fn value(mut self) -> String {
        self.child.stdin.take().unwrap().write_all(b"\n").unwrap();
        let mut rest = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut rest)
            .unwrap();
        assert!(self.child.wait().unwrap().success());
        rest.trim().to_string()
    }
}

/// The test process's own value: the "agent" attacks aim at it (the process that asked for the
/// run: the attacker's parent through the library, an ancestor through the commands).
static AGENT_VALUE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(42);

fn memory_attack(mode: &str, attack_name: &str) {
    let victim = Victim::start();
    let control = control(attack(Variant::Dynamic), &[mode, &victim.pid, &victim.addr]);
    assert_eq!(
        victim.value(),
        "666",
        "{mode} changes the victim unsandboxed: {control:?}"
    );
    every_runner(|r| {
        for profile in ["minimal", "no-exec"] {
            for v in BOTH {
                let victim = Victim::start();
                let ran = sandboxed(
                    r,
                    &format!("{attack_name} (another process)"),
                    profile,
                    v,
                    &[mode, &victim.pid, &victim.addr],
                );
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert_eq!(victim.value(), "42", "{profile} {v:?}: {ran:?}");
                let addr = format!("{:p}", &AGENT_VALUE);
                let me = std::process::id().to_string();
                let ran = sandboxed(
                    r,
                    &format!("{attack_name} (the agent)"),
                    profile,
                    v,
                    &[mode, &me, &addr],
                );
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert_eq!(AGENT_VALUE.load(Ordering::SeqCst), 42);
            }
        }
    });
}

#[test]
fn ptrace_of_the_parent() {
    memory_attack("ptrace", "ptrace attach + poke");
}

#[test]
fn process_vm_writev_to_the_parent() {
    memory_attack("vm-write", "process_vm_writev");
}

/// A pty pair in raw mode: (master, slave, the slave's path).
fn raw_pty() -> (OwnedFd, OwnedFd, String) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors; the name, termios and winsize may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    // SAFETY: termios is plain data, filled by tcgetattr before use.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: slave is an open terminal; t is a valid termios.
    unsafe {
        assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut t), 0);
        libc::cfmakeraw(&mut t);
        assert_eq!(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t), 0);
    }
    let path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd()))
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    (master, slave, path)
}

/// What waits in the terminal's input queue (what a shell reading it would run).
fn pending_input(slave: &OwnedFd) -> Vec<u8> {
    let fd = slave.as_raw_fd();
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        )
    };
    let mut buf = [0u8; 64];
    // SAFETY: reads into a buffer of the length given.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN)
        );
        return Vec::new();
    }
    buf[..n as usize].to_vec()
}

/// The attacker opens a terminal of the user by its path (the agent's own, say) and types a
/// line into it: no runner gives the program a terminal on stdin, and none should let it
/// reach one.
#[test]
fn tiocsti_on_a_pty() {
    let (_master, slave, path) = raw_pty();
    // Root may type into any terminal; another uid only into its controlling one, so the
    // control makes the pty that (a new session, TIOCSCTTY) before exec.
    let tty = slave.as_raw_fd();
    let control = control_with(attack(Variant::Dynamic), &["tiocsti", &path], |cmd| {
        // SAFETY: setsid and ioctl are async-signal-safe; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(tty, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    assert_eq!(
        pending_input(&slave),
        b"INJECTED\n",
        "TIOCSTI injects input unsandboxed: {control:?}"
    );
    every_runner(|r| {
        for profile in ["minimal", "shell"] {
            for v in BOTH {
                let (_master, slave, path) = raw_pty();
                let ran = sandboxed(
                    r,
                    "TIOCSTI on the user's pty",
                    profile,
                    v,
                    &["tiocsti", &path],
                );
                assert_eq!(pending_input(&slave), b"", "{profile} {v:?}: {ran:?}");
                // With namespaces the user's other terminals are not in the job's view (its
                // own devpts instance); without them the filter refuses the ioctl.
                assert!(
                    ran.stdout
                        .contains(&format!("ioctl(TIOCSTI): ret=-1 errno={}", libc::EPERM))
                        || ran
                            .stdout
                            .contains(&format!("open(tty): ret=-1 errno={}", libc::ENOENT)),
                    "{profile} {v:?}: {ran:?}"
                );
            }
        }
    });
}

/// A write attack under `minimal`: `mode` with `args(dir)` must leave `effect(dir)` false.
fn write_attack(attack_name: &str, mode: &str, errno: i32, effect: impl Fn(&Path) -> bool + Sync) {
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old"), "old").unwrap();
        dir
    };
    let args = |d: &Path| -> Vec<String> {
        match mode {
            "rename" | "linkat" => vec![
                mode.into(),
                path_str(&d.join("old")).into(),
                path_str(&d.join("new")).into(),
            ],
            _ => vec![mode.into(), path_str(&d.join("new")).into()],
        }
    };
    let dir = fresh();
    let control = control(attack(Variant::Dynamic), &strs(&args(dir.path())));
    assert!(effect(dir.path()), "{mode} works unsandboxed: {control:?}");
    every_runner(|r| {
        for v in BOTH {
            let dir = fresh();
            let ran = sandboxed(r, attack_name, "minimal", v, &strs(&args(dir.path())));
            assert!(!effect(dir.path()), "{v:?}: {ran:?}");
            assert!(
                ran.stdout
                    .contains(&format!("{mode}: ret=-1 errno={errno}")),
                "{v:?}: {ran:?}"
            );
        }
    });
}

#[test]
fn openat2_write_under_minimal() {
    write_attack("openat2(O_CREAT)", "openat2", libc::ENOSYS, |d| {
        d.join("new").exists()
    });
}

#[test]
fn creat_under_minimal() {
    write_attack("creat", "creat", libc::EROFS, |d| d.join("new").exists());
}

#[test]
fn rename_under_minimal() {
    write_attack("rename", "rename", libc::EROFS, |d| {
        d.join("new").exists() || !d.join("old").exists()
    });
}

#[test]
fn linkat_under_minimal() {
    write_attack("linkat", "linkat", libc::EROFS, |d| d.join("new").exists());
}

/// Re-exec attacks: the second stage prints `REEXEC` and connects to a listener.
fn reexec_attack(attack_name: &str, mode: &str) {
    let l = Listener::new();
    let control = control(attack(Variant::Dynamic), &[mode, &l.port()]);
    assert!(control.stdout.contains("REEXEC"), "{control:?}");
    assert_eq!(
        l.connections(),
        1,
        "the re-exec'd program connects unsandboxed: {control:?}"
    );
    every_runner(|r| {
        let l = Listener::new();
        for v in BOTH {
            // shell allows exec: the re-exec'd program runs, still under the inherited filter.
            let ran = sandboxed(r, attack_name, "shell", v, &[mode, &l.port()]);
            assert!(
                ran.stdout.contains("REEXEC"),
                "shell lets it re-exec: {v:?}: {ran:?}"
            );
            assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
            assert_eq!(l.connections(), 0, "{v:?}: {ran:?}");
            for profile in ["no-exec", "minimal"] {
                let ran = sandboxed(r, attack_name, profile, v, &[mode, &l.port()]);
                assert!(!ran.stdout.contains("REEXEC"), "{profile} {v:?}: {ran:?}");
                assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
                assert_eq!(l.connections(), 0, "{profile} {v:?}: {ran:?}");
            }
        }
    });
}

#[test]
fn empty_ld_preload_and_reexec() {
    reexec_attack("LD_PRELOAD= and re-exec", "reexec-empty-preload");
}

#[test]
fn cleared_environment_and_reexec() {
    reexec_attack("clearenv and re-exec itself", "reexec-clearenv");
}

/// Fills every free descriptor below the lowest one that closes at exec with /dev/null and
/// lowers RLIMIT_NOFILE to it, so that after exec every descriptor the loader could get is
/// taken (the control's setup).
fn fill_descriptors(cmd: &mut Command) {
    let null = std::fs::File::open("/dev/null").unwrap();
    // SAFETY: the hook makes only async-signal-safe calls (fcntl, dup2, setrlimit) and does
    // not allocate; `null` is moved in and stays open until exec.
    unsafe {
        cmd.pre_exec(move || {
            let null_fd = null.as_raw_fd();
            let mut limit = 1024;
            for fd in 3..1024 {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                    limit = fd;
                    break;
                }
            }
            for fd in 3..limit {
                if libc::fcntl(fd, libc::F_GETFD) < 0 && libc::dup2(null_fd, fd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            soft_nofile(limit as libc::rlim_t)
        });
    }
}

/// A program the preload could not enter (a dynamic one with no libraries, started with no
/// descriptor left for the loader) is confined by the filter installed before exec. No runner
/// loads the preload for a built-in profile, and none lets the caller's descriptors reach the
/// program: each runs it with the lowest descriptor limit it takes.
#[test]
fn too_many_descriptors_for_the_preload() {
    let l = Listener::new();
    let prog = &programs().fdfull;
    let control = control_with(prog, &[&l.port()], fill_descriptors);
    assert!(control.success(), "{control:?}");
    assert_eq!(l.connections(), 1, "it connects unsandboxed: {control:?}");
    every_runner(|r| {
        let l = Listener::new();
        let port = l.port();
        let mut job = Job::new("minimal", Variant::Dynamic, prog, &[&port]);
        job.nofile = Some(16);
        let ran = check_and_record(
            r,
            "the lowest descriptor limit, no libraries",
            "minimal",
            "dynamic (no libraries)",
            job.run(r),
        );
        assert!(ran.killed_by_sigsys(), "{ran:?}");
        assert!(!ran.stdout.contains("socket opened"), "{ran:?}");
        assert_eq!(l.connections(), 0, "{ran:?}");
    });
}

/// The signal-routing program.
fn sigroute(v: Variant) -> &'static Path {
    match v {
        Variant::Dynamic => &programs().sigroute,
        Variant::Static => &programs().sigroute_static,
    }
}

/// Whether `pid` was sent a signal that ends it: a zombie, or SIGTERM/SIGIO pending. Signals
/// from O_ASYNC are generated inside the attacker's write(), so once the attacker has exited
/// either the victim is dead or the signal is pending: no waiting is involved.
fn got_a_fatal_signal(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    if field("State:").starts_with('Z') {
        return true;
    }
    let fatal = (1u64 << (libc::SIGTERM - 1)) | (1u64 << (libc::SIGIO - 1));
    ["SigPnd:", "ShdPnd:"]
        .iter()
        .any(|f| u64::from_str_radix(&field(f), 16).unwrap_or(0) & fatal != 0)
}

/// A `sleep` the attacker did not start; killed and reaped when dropped (also on a failed
/// assertion).
struct Sleeper(std::process::Child);

impl Sleeper {
    fn new() -> Sleeper {
        Sleeper(Command::new("sleep").arg("1000").spawn().unwrap())
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn fcntl_and_ioctl_route_no_signal_to_another_process() {
    // The fcntl forms work on a pipe; FIOSETOWN needs a socket, here a Unix socket pair, which
    // every profile lets a program create.
    let cases: [(&str, &str, libc::c_int); 3] = [
        ("fcntl", "fcntl(F_SETOWN)", libc::SIGTERM),
        ("fcntl-ex", "fcntl(F_SETOWN_EX)", libc::SIGTERM),
        ("ioctl", "ioctl(FIOSETOWN)", libc::SIGIO),
    ];
    for (mode, _, signal) in cases {
        // Control: unsandboxed, the attacker ends a `sleep` it did not start.
        let mut victim = Sleeper::new();
        let pid = victim.pid().to_string();
        let control = control(sigroute(Variant::Dynamic), &[mode, &pid]);
        assert!(control.success(), "{mode}: {control:?}");
        assert!(
            got_a_fatal_signal(victim.pid()),
            "{mode}: control: {control:?}"
        );
        let st = victim.0.wait().unwrap();
        assert_eq!(st.signal(), Some(signal), "{mode}: control: {control:?}");
    }
    every_runner(|r| {
        for (mode, owner_call, _) in cases {
            for profile in ["minimal", "write", "shell", "network"] {
                for v in BOTH {
                    let victim = Sleeper::new();
                    let pid = victim.pid().to_string();
                    let ran = Job::new(profile, v, sigroute(v), &[mode, &pid]).run(r);
                    let ran = check_and_record(
                        r,
                        &format!("signal routed by {owner_call} to another process"),
                        profile,
                        v.name(),
                        ran,
                    );
                    let what = format!("{mode} under {profile} ({}): {ran:?}", v.name());
                    assert!(!got_a_fatal_signal(victim.pid()), "{what}");
                    assert!(ran.success(), "{what}");
                    let refused = format!("{owner_call}: ret=-1 errno={}", libc::EPERM);
                    assert!(ran.stdout.contains(&refused), "{what}");
                }
            }
        }
    });
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Every built-in profile that installs a filter.
const FILTERING: [&str; 6] = [
    "minimal",
    "network",
    "write",
    "no-exec",
    "shell",
    "shell-network",
];

/// How many times this process got SIGUSR2 (the signal the attacks aim at the agent).
static AGENT_SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_signal(_: libc::c_int) {
    AGENT_SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// This process (the agent that asks for runs) counts SIGUSR2 instead of dying of it.
fn agent_counts_signals() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let handler: extern "C" fn(libc::c_int) = count_signal;
        // SAFETY: the handler only does an atomic add, which is async-signal-safe.
        let old = unsafe { libc::signal(libc::SIGUSR2, handler as libc::sighandler_t) };
        assert_ne!(old, libc::SIG_ERR, "{}", std::io::Error::last_os_error());
    });
}

/// Waits until `pid` has a signal pending or is a zombie, for at most `ms` milliseconds.
fn signalled_within(pid: u32, ms: u64) -> bool {
    for _ in 0..ms / 10 {
        if got_a_fatal_signal(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    got_a_fatal_signal(pid)
}

/// `kill` and `tgkill` from the sandbox, aimed at a process the program did not start (with
/// SIGKILL), at the agent (this process, with SIGUSR2, which it counts), and through `serve`
/// at the serve host itself (SIGKILL): none arrives under any filtering profile.
#[test]
fn kill_and_tgkill_reach_no_process_outside() {
    agent_counts_signals();
    let me = std::process::id().to_string();
    for route in ["kill", "tgkill"] {
        let mut victim = Sleeper::new();
        let pid = victim.pid().to_string();
        let sig = libc::SIGKILL.to_string();
        let c = control(attack(Variant::Dynamic), &["signal", route, &pid, &sig]);
        assert!(
            signalled_within(victim.pid(), 1000),
            "{route} kills unsandboxed: {c:?}"
        );
        assert_eq!(victim.0.wait().unwrap().signal(), Some(libc::SIGKILL));
        let before = AGENT_SIGNALS.load(Ordering::SeqCst);
        let usr2 = libc::SIGUSR2.to_string();
        let c = control(attack(Variant::Dynamic), &["signal", route, &me, &usr2]);
        // The handler runs once the thread is scheduled: under a loaded CI that took longer
        // than 50 ms once, so wait for it up to 2 s.
        for _ in 0..200 {
            if AGENT_SIGNALS.load(Ordering::SeqCst) != before {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(AGENT_SIGNALS.load(Ordering::SeqCst), before + 1, "{c:?}");
    }
    let before = AGENT_SIGNALS.load(Ordering::SeqCst);
    every_runner(|r| {
        let kill = libc::SIGKILL.to_string();
        let usr2 = libc::SIGUSR2.to_string();
        for profile in FILTERING {
            for v in BOTH {
                for route in ["kill", "tgkill"] {
                    let victim = Sleeper::new();
                    let pid = victim.pid().to_string();
                    let ran = sandboxed(
                        r,
                        &format!("{route} SIGKILL to a process outside"),
                        profile,
                        v,
                        &["signal", route, &pid, &kill],
                    );
                    assert!(
                        !got_a_fatal_signal(victim.pid()),
                        "{profile} {v:?}: {ran:?}"
                    );
                    sandboxed(
                        r,
                        &format!("{route} to the agent"),
                        profile,
                        v,
                        &["signal", route, &me, &usr2],
                    );
                    if r == Runner::Serve {
                        let host = server().pid.to_string();
                        let ran = sandboxed(
                            r,
                            &format!("{route} SIGKILL to the serve host"),
                            profile,
                            v,
                            &["signal", route, &host, &kill],
                        );
                        assert!(
                            !got_a_fatal_signal(server().pid),
                            "{profile} {v:?}: {ran:?}"
                        );
                    }
                }
            }
        }
    });
    // As long as the control above may take to see its signal.
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(
        AGENT_SIGNALS.load(Ordering::SeqCst),
        before,
        "a sandboxed program signalled the agent"
    );
}

/// The agent's value the `/proc/PID/mem` attack aims at.
static AGENT_MEM_VALUE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(42);

/// `open("/proc/PID/mem", O_RDWR)` and `pwrite` into a victim's memory and into the agent's:
/// code execution outside the sandbox if it worked.
#[test]
fn proc_pid_mem_writes_no_other_process() {
    let victim = Victim::start();
    let c = control(
        attack(Variant::Dynamic),
        &["procmem", &victim.pid, &victim.addr],
    );
    assert_eq!(
        victim.value(),
        "666",
        "/proc/PID/mem writes unsandboxed: {c:?}"
    );
    let me = std::process::id().to_string();
    let addr = format!("{:p}", &AGENT_MEM_VALUE);
    every_runner(|r| {
        for profile in FILTERING {
            for v in BOTH {
                let victim = Victim::start();
                let ran = sandboxed(
                    r,
                    "/proc/PID/mem write (another process)",
                    profile,
                    v,
                    &["procmem", &victim.pid, &victim.addr],
                );
                assert_eq!(victim.value(), "42", "{profile} {v:?}: {ran:?}");
                let ran = sandboxed(
                    r,
                    "/proc/PID/mem write (the agent)",
                    profile,
                    v,
                    &["procmem", &me, &addr],
                );
                assert_eq!(
                    AGENT_MEM_VALUE.load(Ordering::SeqCst),
                    42,
                    "{profile} {v:?}: {ran:?}"
                );
            }
        }
    });
}

/// `/proc/PID/environ` of a process outside the sandbox (the agent's API keys): unreadable.
#[test]
fn proc_pid_environ_of_another_process_is_unreadable() {
    let secret = format!("ESCAPE_SECRET=sk-{}-{}", std::process::id(), line!());
    let start = || {
        let (k, v) = secret.split_once('=').unwrap();
        let s = Sleeper(Command::new("sleep").arg("1000").env(k, v).spawn().unwrap());
        // `spawn` returns once the child's exec has replaced its memory, a moment before the
        // kernel records where the new environment lies: until then `environ` reads empty
        // (a control failed so once). The test's own read of its child waits for it.
        let environ = format!("/proc/{}/environ", s.pid());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read(&environ)
            .is_ok_and(|e| e.windows(secret.len()).any(|w| w == secret.as_bytes()))
        {
            assert!(
                std::time::Instant::now() < until,
                "{environ} never held the secret"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        s
    };
    let victim = start();
    let c = control(
        attack(Variant::Dynamic),
        &["environ", &victim.pid().to_string()],
    );
    assert!(
        c.stdout.contains(&secret),
        "environ is readable unsandboxed: {c:?}"
    );
    every_runner(|r| {
        let victim = start();
        let pid = victim.pid().to_string();
        for profile in FILTERING {
            for v in BOTH {
                let ran = sandboxed(
                    r,
                    "/proc/PID/environ of another process",
                    profile,
                    v,
                    &["environ", &pid],
                );
                assert!(!ran.stdout.contains(&secret), "{profile} {v:?}: {ran:?}");
                assert!(!ran.stdout.contains("ENVIRON "), "{profile} {v:?}: {ran:?}");
            }
        }
    });
}

/// The extracted `libsandbox.so` that later `sandbox env` users load: no sandboxed program may
/// open it for writing (opened only; nothing is written, here or in the control).
#[test]
fn the_extracted_preload_cannot_be_opened_for_writing() {
    let so = sandbox_host::extract::extracted().expect("extracting the preload");
    let so = path_str(&so).to_string();
    let c = control(attack(Variant::Dynamic), &["open-rw", &so]);
    let opened = c
        .stdout
        .lines()
        .any(|l| l.starts_with("open(O_RDWR): ret=") && !l.contains("errno"));
    if is_root() {
        assert!(
            opened,
            "root opens the 0444 library for writing unsandboxed: {c:?}"
        );
    }
    no_runner_opens_for_writing("open the extracted libsandbox.so O_RDWR", &so);
}

/// Under every filtering profile, through every runner, dynamic and static: opening `target`
/// for writing is refused (an error, or the program stopped by the filter).
fn no_runner_opens_for_writing(what: &str, target: &str) {
    every_runner(|r| {
        for profile in FILTERING {
            for v in BOTH {
                let ran = sandboxed(r, what, profile, v, &["open-rw", target]);
                assert!(
                    ran.killed_by_sigsys() || ran.stdout.contains("open(O_RDWR): ret=-1"),
                    "{target} {profile} {v:?}: {ran:?}"
                );
            }
        }
    });
}

/// As root, the files through which a program would act outside the sandbox: the crash
/// handler every later core dump runs as root, unfiltered (`/proc/sys/kernel/core_pattern`),
/// and the root cgroup's `cgroup.procs`, which moves a process out of its request's cgroup.
/// No sandboxed program opens them for writing (opened only; nothing is written, here or in
/// the control, where root opens both).
#[test]
fn root_cannot_open_core_pattern_or_cgroup_procs_for_writing() {
    if !is_root() {
        return;
    }
    let procs = ["", "unified/", "pids/"]
        .iter()
        .map(|d| format!("/sys/fs/cgroup/{d}cgroup.procs"))
        .find(|p| Path::new(p).exists())
        .expect("a cgroup hierarchy");
    for target in ["/proc/sys/kernel/core_pattern", &procs] {
        let c = control(attack(Variant::Dynamic), &["open-rw", target]);
        assert!(
            c.stdout
                .lines()
                .any(|l| l.starts_with("open(O_RDWR): ret=") && !l.contains("errno")),
            "root opens {target} for writing unsandboxed: {c:?}"
        );
        no_runner_opens_for_writing("open core_pattern or cgroup.procs O_RDWR", target);
    }
}

/// Processes whose command line contains `mark`.
fn marked(mark: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            cmdline
                .split(|b| *b == 0)
                .any(|a| a == mark.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// A double-forked process in its own session (`setsid`) outlives its command unsandboxed; no
/// runner leaves it behind, whether the program exits or its timeout ends it.
#[test]
fn no_process_outlives_its_run() {
    let mark = format!("mark-{}-control", std::process::id());
    let c = control(attack(Variant::Dynamic), &["daemon", &mark]);
    assert!(c.stdout.contains("DAEMON LEFT"), "{c:?}");
    let left = marked(&mark);
    for pid in &left {
        // SAFETY: kill has no memory preconditions; the pid is the control's leftover.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    assert_eq!(left.len(), 1, "the daemon survives unsandboxed: {c:?}");
    every_runner(|r| {
        for profile in ["shell", "shell-network"] {
            for v in BOTH {
                for (mode, timeout) in [("daemon", 30), ("daemon-stay", 1)] {
                    let mark = format!(
                        "mark-{}-{}-{profile}-{}-{mode}",
                        std::process::id(),
                        r.name().replace(' ', ""),
                        v.name()
                    );
                    let mut job = Job::new(profile, v, attack(v), &[mode, &mark]);
                    job.timeout = timeout;
                    let ran = job.run(r);
                    let what = if timeout == 1 {
                        "a setsid daemon, then the timeout"
                    } else {
                        "a setsid daemon, then exit"
                    };
                    let ran = check_and_record(r, what, profile, v.name(), ran);
                    let left = marked(&mark);
                    for pid in &left {
                        // SAFETY: as above; only this run's leftovers carry the mark.
                        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
                    }
                    assert!(
                        ran.stdout.contains("DAEMON LEFT"),
                        "{profile} {v:?} {mode}: {ran:?}"
                    );
                    assert_eq!(left, Vec::<u32>::new(), "{profile} {v:?} {mode}: {ran:?}");
                }
            }
        }
    });
}

/// As root, every other test of this binary again as uid 65534 in a bare environment: the
/// protections must hold for an ordinary user too (their controls differ only where the kernel
/// itself refuses another uid: raw sockets, typing into a terminal that is not its own). Run as
/// another uid already, the suite is that run, and this test has nothing to add.
#[test]
fn every_attack_as_an_unprivileged_uid() {
    if !is_root() {
        return;
    }
    let home = tempfile::Builder::new()
        .prefix("escape-home")
        .tempdir()
        .unwrap();
    std::os::unix::fs::chown(home.path(), Some(65534), Some(65534)).unwrap();
    // The runs start in a directory of the home, not the home itself: a home as the default
    // workspace is refused as too broad.
    let work = home.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--quiet", "--skip", "every_attack_as_an_unprivileged_uid"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("LANG", "C.UTF-8")
        .envs(std::env::var_os("SANDBOX_TEST_BINARY").map(|b| ("SANDBOX_TEST_BINARY", b)))
        .current_dir(&work)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run setpriv (util-linux)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "as uid 65534:\n{text}");
    assert!(text.contains("test result: ok"), "as uid 65534:\n{text}");
}

/// How many processes a `forks` run started.
fn forked(ran: &Ran) -> usize {
    ran.stdout
        .lines()
        .find_map(|l| l.strip_prefix("FORKED "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no FORKED line: {ran:?}"))
}

/// A fork bomb inside one command: 1,100 waiting processes start unsandboxed; through every
/// runner the request's default process limit (1,024, the program and its descendants) stops
/// it, under a profile that allows fork.
#[test]
fn a_request_cannot_start_more_than_its_process_limit() {
    let c = control(attack(Variant::Dynamic), &["forks", "1100"]);
    assert_eq!(
        forked(&c),
        1100,
        "1,100 forks go through unsandboxed: {c:?}"
    );
    every_runner(|r| {
        for v in BOTH {
            let ran = sandboxed(
                r,
                "1,100 forks in one request",
                "shell",
                v,
                &["forks", "1100"],
            );
            let n = forked(&ran);
            assert!(n < 1024, "{v:?}: {n} processes: {ran:?}");
            let refused = format!("fork: ret=-1 errno={}", libc::EAGAIN);
            assert!(ran.stdout.contains(&refused), "{v:?}: {ran:?}");
        }
    });
}

/// Sets this process's soft descriptor limit to `n` (the hard limit stays). Called between
/// fork and exec: async-signal-safe, allocates nothing.
fn soft_nofile(n: libc::rlim_t) -> std::io::Result<()> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit write or read only the local `rl`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        rl.rlim_cur = n;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Landlock's plan holds every path it grants or carves around a credential by an `O_PATH`
/// handle, never by opening the file. Beside a credential in the home, a FIFO without a writer
/// (opening it for reading blocks until one comes) must not stall the run. Found on the
/// release bundle: std's `OpenOptions` masks custom flags with musl's `O_ACCMODE`, which
/// holds `O_PATH`, so the static build opened every entry for reading.
#[test]
fn a_fifo_beside_a_credential_does_not_stall_the_run() {
    let home = tempfile::Builder::new()
        .prefix("escape-fifo")
        .tempdir()
        .unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "KEY\n").unwrap();
    let fifo = home.path().join("queue");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let work = home.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let wait = |mut child: std::process::Child| -> Option<std::process::ExitStatus> {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    };
    // Control: reading the FIFO does block.
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut reader = reader;
    assert!(
        reader.try_wait().unwrap().is_none(),
        "cat of a FIFO without a writer returned"
    );
    let _ = reader.kill();
    let _ = reader.wait();

    let child = Command::new(sandbox_binary())
        .args([
            "run",
            "--allow-root",
            "--profile",
            "minimal",
            "--",
            "/bin/cat",
        ])
        .arg(home.path().join(".ssh/id_rsa"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.path())
        .env("LANG", "C.UTF-8")
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait(child).expect("the run stalled on the FIFO beside the credential");
    // And the credential beside it stayed unreadable.
    assert!(!status.success(), "{status:?}");
}
