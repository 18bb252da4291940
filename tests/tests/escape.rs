//! The escape suite: small attack programs, compiled with gcc at test time, each run under the
//! profiles it targets, each asserting that the attack's *effect* did not happen (a file not
//! created, a connection or datagram not received by a listener the test runs, a program not
//! started, another process's memory unchanged, a terminal's input queue empty).
//!
//! Every attack also runs once unsandboxed and must have its effect there: a test that cannot
//! fail proves nothing. Programs that exist in both forms run as a dynamic glibc program (the
//! preload's exact filter on top of the host's outer filter) and as a static one under
//! `--static-binary confine` (the outer filter alone).
//!
//! `ESCAPE_TABLE=/some/file cargo test -p sandbox-tests --test escape` appends one Markdown row
//! per sandboxed run (attack, profile, variant, outcome) to that file: the source of the table
//! in `docs/security.md`, whose rows are named like these tests.

use sandbox_host::{Options, Sandbox, Sandboxed, StaticBinaryAction};
use sandbox_policy::profile::Profile;
use sandbox_tests::{compile_c, Build};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

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
        /* Types a command into the terminal on stdin, as if the user had. */
        for (const char *p = "INJECTED\n"; *p; p++) {
            int r = ioctl(0, TIOCSTI, p);
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

/// How an attack program was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// A glibc dynamic program: the preload enters it.
    Dynamic,
    /// `gcc -static`: no loader, the outer filter alone (`--static-binary confine`).
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

    /// How the sandbox is expected to have confined this variant: exactly, both ways, since a
    /// built-in profile needs no loader exemption and the outer filter is the profile itself.
    fn confinement(self) -> Sandboxed {
        match self {
            Variant::Dynamic | Variant::Static => Sandboxed::Exact,
        }
    }
}

/// The compiled programs, built once per test binary.
struct Programs {
    _dir: tempfile::TempDir,
    dynamic: PathBuf,
    static_: PathBuf,
    victim: PathBuf,
    fdfull: PathBuf,
}

fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("escape").tempdir().unwrap();
        let d = dir.path();
        let fdfull = d.join("fdfull");
        std::fs::write(d.join("fdfull.c"), FDFULL_C).unwrap();
        let out = Command::new("gcc")
            .args(["-nostdlib", "-fno-stack-protector", "-O1", "-o"])
            .arg(&fdfull)
            .arg(d.join("fdfull.c"))
            .output()
            .expect("cannot run gcc");
        assert!(
            out.status.success(),
            "gcc fdfull: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Programs {
            dynamic: compile_c(d, "attack", ATTACK_C, Build::Dynamic),
            static_: compile_c(d, "attack-static", ATTACK_C, Build::Static),
            victim: compile_c(d, "victim", VICTIM_C, Build::Dynamic),
            fdfull,
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

/// One sandbox per built-in profile, with the profile's own action (kill) and static programs
/// confined by the outer filter.
fn sandbox(profile: &str) -> &'static Sandbox {
    static S: OnceLock<Mutex<HashMap<String, &'static Sandbox>>> = OnceLock::new();
    let mut map = S
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(profile.to_string()).or_insert_with(|| {
        // `NAME:trap` asks for the trap action, which loads the preload for its handler.
        let (name, trap) = match profile.strip_suffix(":trap") {
            Some(n) => (n, true),
            None => (profile, false),
        };
        let options = Options {
            profile: Profile::builtin(name).unwrap(),
            on_violation: trap.then_some(sandbox_policy::Action::Trap),
            static_binary: StaticBinaryAction::Confine,
            require_sandbox: true,
            libsandbox_path: None,
            libsandbox_sha256: None,
        };
        Box::leak(Box::new(Sandbox::new(options).unwrap()))
    })
}

/// What one run did.
#[derive(Debug)]
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    /// How it was confined (`None` for an unsandboxed control run).
    sandboxed: Option<Sandboxed>,
}

impl Ran {
    fn killed_by_sigsys(&self) -> bool {
        self.status.signal() == Some(libc::SIGSYS)
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
                Some(format!("{call}: {}", errno_name(e)))
            })
            .collect();
        match (failed.is_empty(), self.status.code()) {
            (false, _) => failed.join(", "),
            (true, Some(c)) => format!("exit {c}"),
            (true, None) => format!("{:?}", self.status),
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
        _ => format!("errno {e}"),
    }
}

/// Runs `prog args` under `profile` (or unsandboxed for `None`), with `setup` applied to the
/// command first (so the sandbox's own pre_exec hook comes last), and kills it after 30 s.
fn run_with(
    profile: Option<&str>,
    prog: &Path,
    args: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Ran {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut cmd);
    let mut applied = profile.map(|p| sandbox(p).apply(&mut cmd, prog).expect("apply"));
    let child = cmd.spawn().expect("spawn");
    if let Some(a) = &mut applied {
        a.spawned();
    }
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
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
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        sandboxed: applied.map(|a| a.finish().sandboxed),
    }
}

fn run(profile: Option<&str>, prog: &Path, args: &[&str]) -> Ran {
    run_with(profile, prog, args, |_| {})
}

/// Runs one attack under `profile`, checks how it was confined, and records the table row.
fn sandboxed(attack_name: &str, profile: &str, v: Variant, args: &[&str]) -> Ran {
    let ran = run(Some(profile), attack(v), args);
    check_and_record(attack_name, profile, v.name(), v.confinement(), ran)
}

fn check_and_record(
    attack_name: &str,
    profile: &str,
    variant: &str,
    want: Sandboxed,
    ran: Ran,
) -> Ran {
    assert_eq!(
        ran.sandboxed,
        Some(want),
        "{attack_name} under {profile} ({variant}): {ran:?}"
    );
    if let Some(path) = std::env::var_os("ESCAPE_TABLE") {
        let row = format!(
            "| {attack_name} | {profile} | {variant} | {} |\n",
            ran.outcome()
        );
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

#[test]
fn tcp_connect_under_minimal() {
    let l = Listener::new();
    let control = run(None, attack(Variant::Dynamic), &["connect", &l.port()]);
    assert!(control.status.success(), "{control:?}");
    assert_eq!(l.connections(), 1, "the attack connects when unsandboxed");
    for v in BOTH {
        let ran = sandboxed("TCP connect", "minimal", v, &["connect", &l.port()]);
        assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
        assert_eq!(l.connections(), 0, "{v:?}: {ran:?}");
    }
}

#[test]
fn raw_socket_under_minimal() {
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_nonblocking(true).unwrap();
    let port = u.local_addr().unwrap().port().to_string();
    let received = || {
        let mut buf = [0u8; 64];
        match u.recv(&mut buf) {
            Ok(n) => Some(buf[..n].to_vec()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("recv: {e}"),
        }
    };
    let control = run(None, attack(Variant::Dynamic), &["raw-udp", &port]);
    assert!(control.status.success(), "{control:?}");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        received().as_deref(),
        Some(&b"RAW"[..]),
        "a raw socket delivers a datagram unsandboxed: {control:?}"
    );
    for v in BOTH {
        let ran = sandboxed("raw socket", "minimal", v, &["raw-udp", &port]);
        assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(received(), None, "{v:?}: {ran:?}");
    }
}

#[test]
fn io_uring_reads_and_socket_ops_under_every_profile() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "SECRET").unwrap();
    let l = Listener::new();
    let created = dir.path().join("control");
    let args = |p: &Path| {
        vec![
            "uring".to_string(),
            path_str(p).into(),
            l.port(),
            path_str(&secret).into(),
        ]
    };
    let a = args(&created);
    let control = run(
        None,
        attack(Variant::Dynamic),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
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
    for profile in ["minimal", "network", "write", "no-exec", "shell"] {
        for v in BOTH {
            let created = dir.path().join(format!("{profile}-{}", v.name()));
            let a = args(&created);
            let ran = sandboxed(
                "io_uring",
                profile,
                v,
                &a.iter().map(String::as_str).collect::<Vec<_>>(),
            );
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
}

#[test]
fn int80_from_a_64_bit_program() {
    let dir = tempfile::tempdir().unwrap();
    let created = dir.path().join("control");
    let control = run(
        None,
        attack(Variant::Dynamic),
        &["int80", path_str(&created)],
    );
    assert!(
        created.exists(),
        "int 0x80 creat works unsandboxed: {control:?}"
    );
    // shell allows creat: only the architecture check can stop it there.
    for profile in ["minimal", "shell"] {
        for v in BOTH {
            let created = dir.path().join(format!("{profile}-{}", v.name()));
            let ran = sandboxed(
                "int 0x80 (i386 creat)",
                profile,
                v,
                &["int80", path_str(&created)],
            );
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert!(!created.exists(), "{profile} {v:?}");
        }
    }
}

#[test]
fn x32_numbered_syscalls() {
    let dir = tempfile::tempdir().unwrap();
    let created = dir.path().join("control");
    let control = run(None, attack(Variant::Dynamic), &["x32", path_str(&created)]);
    // This kernel has no x32 ABI (CONFIG_X86_X32_ABI unset): unsandboxed the call fails with
    // ENOSYS and the program goes on; a kernel with x32 creates the file. Either way it is
    // not killed, so a kill below is the filter's doing.
    assert!(control.status.success(), "{control:?}");
    assert!(
        created.exists() || control.stdout.contains(&format!("errno={}", libc::ENOSYS)),
        "{control:?}"
    );
    for profile in ["minimal", "shell"] {
        for v in BOTH {
            let created = dir.path().join(format!("{profile}-{}", v.name()));
            let ran = sandboxed(
                "x32 syscall (creat + 0x40000000)",
                profile,
                v,
                &["x32", path_str(&created)],
            );
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert!(!created.exists(), "{profile} {v:?}");
        }
    }
}

/// Runs an exec attack (`execve`, `execveat`, `memfd-exec`): the exec'd copy would print
/// `EXECED` and create the marker.
fn exec_attack(attack_name: &str, mode: &str, profiles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for v in BOTH {
        let marker = dir.path().join(format!("control-{}", v.name()));
        let control = run(None, attack(v), &[mode, path_str(&marker)]);
        assert!(
            control.stdout.contains("EXECED") && marker.exists(),
            "{mode} works unsandboxed: {control:?}"
        );
    }
    for profile in profiles {
        for v in BOTH {
            let marker = dir.path().join(format!("{profile}-{}", v.name()));
            let ran = sandboxed(attack_name, profile, v, &[mode, path_str(&marker)]);
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert!(!ran.stdout.contains("EXECED"), "{profile} {v:?}: {ran:?}");
            assert!(!marker.exists(), "{profile} {v:?}");
        }
    }
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
    let control = run(None, attack(Variant::Dynamic), &[mode]);
    assert!(
        control.stdout.contains("CHILD RAN"),
        "{mode} starts a process unsandboxed: {control:?}"
    );
    for v in BOTH {
        let ran = sandboxed(attack_name, "minimal", v, &[mode]);
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

/// The test process's own value: the "parent" attacks aim at it (the attacker's real parent).
static PARENT_VALUE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(42);

fn memory_attack(mode: &str, attack_name: &str) {
    let victim = Victim::start();
    let control = run(
        None,
        attack(Variant::Dynamic),
        &[mode, &victim.pid, &victim.addr],
    );
    assert_eq!(
        victim.value(),
        "666",
        "{mode} changes the victim unsandboxed: {control:?}"
    );
    for profile in ["minimal", "no-exec"] {
        for v in BOTH {
            let victim = Victim::start();
            let ran = sandboxed(
                &format!("{attack_name} (another process)"),
                profile,
                v,
                &[mode, &victim.pid, &victim.addr],
            );
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert_eq!(victim.value(), "42", "{profile} {v:?}: {ran:?}");
            // The attacker's parent is this test process: aim at a value of ours.
            let addr = format!("{:p}", &PARENT_VALUE);
            let ppid = std::process::id().to_string();
            let ran = sandboxed(
                &format!("{attack_name} (the parent)"),
                profile,
                v,
                &[mode, &ppid, &addr],
            );
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert_eq!(PARENT_VALUE.load(std::sync::atomic::Ordering::SeqCst), 42);
        }
    }
}

#[test]
fn ptrace_of_the_parent() {
    memory_attack("ptrace", "ptrace attach + poke");
}

#[test]
fn process_vm_writev_to_the_parent() {
    memory_attack("vm-write", "process_vm_writev");
}

/// A pty pair in raw mode: (master, slave).
fn raw_pty() -> (OwnedFd, OwnedFd) {
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
    (master, slave)
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

#[test]
fn tiocsti_on_a_pty() {
    let run_on_pty = |profile: Option<&str>, v: Variant| {
        let (_master, slave) = raw_pty();
        let stdin = slave.try_clone().unwrap();
        let ran = run_with(profile, attack(v), &["tiocsti"], |c| {
            c.stdin(Stdio::from(stdin));
        });
        (ran, pending_input(&slave))
    };
    let (control, typed) = run_on_pty(None, Variant::Dynamic);
    assert_eq!(
        typed, b"INJECTED\n",
        "TIOCSTI injects input unsandboxed: {control:?}"
    );
    for profile in ["minimal", "shell"] {
        for v in BOTH {
            let (ran, typed) = run_on_pty(Some(profile), v);
            let ran = check_and_record("TIOCSTI on a pty", profile, v.name(), v.confinement(), ran);
            assert_eq!(typed, b"", "{profile} {v:?}: {ran:?}");
            assert!(
                ran.stdout
                    .contains(&format!("ioctl(TIOCSTI): ret=-1 errno={}", libc::EPERM)),
                "{ran:?}"
            );
        }
    }
}

/// A write attack under `minimal`: `mode` with `args(dir)` must leave `effect(dir)` false.
fn write_attack(attack_name: &str, mode: &str, errno: i32, effect: impl Fn(&Path) -> bool) {
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
    let a = args(dir.path());
    let control = run(
        None,
        attack(Variant::Dynamic),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(effect(dir.path()), "{mode} works unsandboxed: {control:?}");
    for v in BOTH {
        let dir = fresh();
        let a = args(dir.path());
        let ran = sandboxed(
            attack_name,
            "minimal",
            v,
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(!effect(dir.path()), "{v:?}: {ran:?}");
        assert!(
            ran.stdout
                .contains(&format!("{mode}: ret=-1 errno={errno}")),
            "{v:?}: {ran:?}"
        );
    }
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
    let control = run(None, attack(Variant::Dynamic), &[mode, &l.port()]);
    assert!(control.stdout.contains("REEXEC"), "{control:?}");
    assert_eq!(
        l.connections(),
        1,
        "the re-exec'd program connects unsandboxed: {control:?}"
    );
    for v in BOTH {
        // shell allows exec: the re-exec'd program runs, still under the inherited filter(s).
        let ran = sandboxed(attack_name, "shell", v, &[mode, &l.port()]);
        assert!(
            ran.stdout.contains("REEXEC"),
            "shell lets it re-exec: {v:?}: {ran:?}"
        );
        assert!(ran.killed_by_sigsys(), "{v:?}: {ran:?}");
        assert_eq!(l.connections(), 0, "{v:?}: {ran:?}");
        for profile in ["no-exec", "minimal"] {
            let ran = sandboxed(attack_name, profile, v, &[mode, &l.port()]);
            assert!(!ran.stdout.contains("REEXEC"), "{profile} {v:?}: {ran:?}");
            assert!(ran.killed_by_sigsys(), "{profile} {v:?}: {ran:?}");
            assert_eq!(l.connections(), 0, "{profile} {v:?}: {ran:?}");
        }
    }
}

#[test]
fn empty_ld_preload_and_reexec() {
    reexec_attack("LD_PRELOAD= and re-exec", "reexec-empty-preload");
}

#[test]
fn cleared_environment_and_reexec() {
    reexec_attack("clearenv and re-exec itself", "reexec-clearenv");
}

/// Before the sandbox's own hook: fills every free descriptor below the lowest one that closes
/// at exec with /dev/null and lowers RLIMIT_NOFILE to it, so that after exec every descriptor
/// the loader could get is taken (with the issue's RLIMIT_NOFILE of 1024 when nothing closes).
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
            let mut rl = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            rl.rlim_cur = limit as libc::rlim_t;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn too_many_descriptors_for_the_preload() {
    let l = Listener::new();
    let prog = &programs().fdfull;
    let control = run_with(None, prog, &[&l.port()], fill_descriptors);
    assert!(control.status.success(), "{control:?}");
    assert_eq!(l.connections(), 1, "it connects unsandboxed: {control:?}");
    // The trap action makes the host load the preload (for its handler); it cannot load.
    let ran = run_with(Some("minimal:trap"), prog, &[&l.port()], fill_descriptors);
    assert!(
        ran.stderr.contains("cannot be preloaded"),
        "the preload did not load: {ran:?}"
    );
    // The outer filter, installed before exec, is the exact profile: the run stays confined.
    let ran = check_and_record(
        "too many descriptors for the preload",
        "minimal",
        "dynamic (no libraries)",
        Sandboxed::Exact,
        ran,
    );
    assert!(ran.killed_by_sigsys(), "{ran:?}");
    assert!(!ran.stdout.contains("socket opened"), "{ran:?}");
    assert_eq!(l.connections(), 0, "{ran:?}");
}

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

/// The signal-routing program, dynamic and static, built once.
fn sigroute(v: Variant) -> &'static Path {
    static P: OnceLock<(tempfile::TempDir, PathBuf, PathBuf)> = OnceLock::new();
    let (_, dynamic, static_) = P.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("sigroute")
            .tempdir()
            .unwrap();
        let d = compile_c(dir.path(), "sigroute", SIGROUTE_C, Build::Dynamic);
        let s = compile_c(dir.path(), "sigroute-static", SIGROUTE_C, Build::Static);
        (dir, d, s)
    });
    match v {
        Variant::Dynamic => dynamic,
        Variant::Static => static_,
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
    let cases: [(&str, &str, libc::c_int, &[&str]); 3] = [
        (
            "fcntl",
            "fcntl(F_SETOWN)",
            libc::SIGTERM,
            &["minimal", "write", "shell", "network"],
        ),
        (
            "fcntl-ex",
            "fcntl(F_SETOWN_EX)",
            libc::SIGTERM,
            &["minimal", "write", "shell", "network"],
        ),
        (
            "ioctl",
            "ioctl(FIOSETOWN)",
            libc::SIGIO,
            &["minimal", "write", "shell", "network"],
        ),
    ];
    for (mode, owner_call, signal, profiles) in cases {
        // Control: unsandboxed, the attacker ends a `sleep` it did not start.
        let mut victim = Sleeper::new();
        let pid = victim.pid().to_string();
        let control = run(None, sigroute(Variant::Dynamic), &[mode, &pid]);
        assert!(control.status.success(), "{mode}: {control:?}");
        assert!(
            got_a_fatal_signal(victim.pid()),
            "{mode}: control: {control:?}"
        );
        let st = victim.0.wait().unwrap();
        assert_eq!(st.signal(), Some(signal), "{mode}: control: {control:?}");
        for profile in profiles {
            for v in BOTH {
                let victim = Sleeper::new();
                let pid = victim.pid().to_string();
                let ran = run(Some(profile), sigroute(v), &[mode, &pid]);
                let ran = check_and_record(
                    &format!("signal routed by {owner_call} to another process"),
                    profile,
                    v.name(),
                    v.confinement(),
                    ran,
                );
                let what = format!("{mode} under {profile} ({}): {ran:?}", v.name());
                assert!(!got_a_fatal_signal(victim.pid()), "{what}");
                assert!(ran.status.success(), "{what}");
                let refused = format!("{owner_call}: ret=-1 errno={}", libc::EPERM);
                assert!(ran.stdout.contains(&refused), "{what}");
            }
        }
    }
}
