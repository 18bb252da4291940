//! The floor of the namespace benchmarks: a minimal C launcher doing exactly the kernel work
//! of the sandbox's namespace set and nothing else, compiled by the bench. The one-shot and
//! serve sections run it next to the sandbox, so that their ratios can be read against what any
//! launcher pays on this kernel.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// The floor: the least a launcher can do to start a program in our namespace set on this
/// kernel, in C with raw calls (no Rust, no filter, no Landlock, no cgroups). `floor net
/// PROG` clones an init (a process of its own, as ours is) into new user, PID, mount, IPC,
/// UTS and network namespaces; the init asks to die with its parent, maps its uid and gid,
/// brings loopback up, mounts a
/// fresh `/proc` and a `/tmp` tmpfs, starts the program with `vfork` and waits for it as PID
/// 1. `floor nonet PROG` is the same without the network namespace.
///
/// `floor engine V2DIR PIDSDIR FILTER PROG` is the floor of the engine alone (no layers): the
/// kernel work of a one-shot `sandbox run --landlock off --isolation off --network host`. It
/// makes a request cgroup in the v2 hierarchy at `V2DIR` and one in the v1 `pids` hierarchy
/// at `PIDSDIR` with a process limit (either may be `-`: none, as the sandbox does where the
/// machine has no such hierarchy), clones the child straight into the v2 one, and the child
/// starts a session, joins the v1 one, sets the four resource limits the engine sets, attaches
/// the seccomp program in the file `FILTER` (raw `struct sock_filter`s; `-` for none) with a
/// listener, and execs the program; the launcher waits for it and removes both cgroups.
pub(crate) const FLOOR_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int engine(char **argv);
static int warm(char **argv);
static int load_filter(const char *file, struct sock_fprog *fprog);
static void join_and_limit(int pids_tasks, int mem_tasks, rlim_t fsize);

static void put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) _exit(120);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    if (strcmp(argv[1], "engine") == 0) return argc < 6 ? 2 : engine(argv);
    if (strcmp(argv[1], "warm") == 0) return argc < 9 ? 2 : warm(argv);
    int net = strcmp(argv[1], "net") == 0;
    char uid_map[32], gid_map[32];
    unsigned uid = geteuid(), gid = getegid();
    /* Digits by hand: no stdio in the launcher. */
    char *maps[2] = {uid_map, gid_map};
    unsigned ids[2] = {uid, gid};
    for (int m = 0; m < 2; m++) {
        char d[12]; int n = 0; unsigned v = ids[m];
        do { d[n++] = '0' + v % 10; v /= 10; } while (v);
        char *p = maps[m];
        for (int r = 0; r < 2; r++) { for (int i = n - 1; i >= 0; i--) *p++ = d[i]; *p++ = ' '; }
        *p++ = '1'; *p = 0;
    }
    long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS
        | (net ? CLONE_NEWNET : 0);
    pid_t init = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (init < 0) return 121;
    if (init == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        put("/proc/self/setgroups", "deny");
        put("/proc/self/gid_map", gid_map);
        put("/proc/self/uid_map", uid_map);
        if (net) {
            int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            struct ifreq ifr;
            memset(&ifr, 0, sizeof ifr);
            strcpy(ifr.ifr_name, "lo");
            ifr.ifr_flags = IFF_UP;
            if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) != 0) _exit(122);
            close(s);
        }
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0) != 0) _exit(123);
        if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) _exit(124);
        pid_t prog = vfork();
        if (prog == 0) {
            execve(argv[2], argv + 2, environ);
            _exit(127);
        }
        int st;
        for (;;) {
            pid_t w = waitpid(-1, &st, __WALL);
            if (w == prog) _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            if (w < 0) _exit(125);
        }
    }
    int st;
    if (waitpid(init, &st, 0) != init) return 126;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A request cgroup's path: DIR/floor-PID. */
static void request_dir(char *out, const char *dir, pid_t pid) {
    char d[12]; int n = 0; unsigned v = (unsigned)pid;
    do { d[n++] = '0' + v % 10; v /= 10; } while (v);
    size_t l = strlen(dir);
    memcpy(out, dir, l);
    memcpy(out + l, "/floor-", 7);
    l += 7;
    while (n) out[l++] = d[--n];
    out[l] = 0;
}

static int engine(char **argv) {
    const char *v2 = argv[2], *pids = argv[3], *filter = argv[4];
    char v2dir[512], pidsdir[512], path[600];
    int use_v2 = strcmp(v2, "-") != 0, use_pids = strcmp(pids, "-") != 0;
    struct sock_filter prog[4096];
    struct sock_fprog fprog = {0, prog};
    if (strcmp(filter, "-") != 0 && load_filter(filter, &fprog) != 0) return 110;
    int v2fd = -1, tasks = -1;
    if (use_v2) {
        request_dir(v2dir, v2, getpid());
        if (mkdir(v2dir, 0755) != 0) return 111;
        v2fd = open(v2dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (v2fd < 0) return 112;
    }
    if (use_pids) {
        request_dir(pidsdir, pids, getpid());
        if (mkdir(pidsdir, 0755) != 0) return 113;
        strcpy(path, pidsdir);
        strcat(path, "/pids.max");
        put(path, "1024");
        strcpy(path, pidsdir);
        strcat(path, "/tasks");
        tasks = open(path, O_WRONLY | O_CLOEXEC);
        if (tasks < 0) return 114;
    }
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.flags = CLONE_VFORK | (use_v2 ? CLONE_INTO_CGROUP : 0);
    args.exit_signal = SIGCHLD;
    args.cgroup = use_v2 ? (unsigned long long)v2fd : 0;
    pid_t child = syscall(SYS_clone3, &args, sizeof args);
    if (child < 0) return 115;
    if (child == 0) {
        /* The CLI inherits the caller's file-size limit: none here. */
        join_and_limit(tasks, -1, RLIM_INFINITY);
        if (fprog.len) {
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog) < 0)
                _exit(117);
        }
        execve(argv[5], argv + 5, environ);
        _exit(127);
    }
    int st;
    if (waitpid(child, &st, 0) != child) return 126;
    if (use_v2 && rmdir(v2dir) != 0) return 118;
    if (use_pids && rmdir(pidsdir) != 0) return 119;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* In a child before exec: a session of its own, the v1 request cgroups joined through their
   `tasks` files (-1: none), and the four resource limits the engine sets. */
static void join_and_limit(int pids_tasks, int mem_tasks, rlim_t fsize_bytes) {
    setsid();
    if (pids_tasks >= 0 && write(pids_tasks, "0", 1) != 1) _exit(116);
    if (mem_tasks >= 0 && write(mem_tasks, "0", 1) != 1) _exit(116);
    struct rlimit cpu = {60, 61}, fsize = {fsize_bytes, fsize_bytes};
    struct rlimit nofile = {256, 256}, core = {0, 0};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_FSIZE, &fsize);
    setrlimit(RLIMIT_NOFILE, &nofile);
    setrlimit(RLIMIT_CORE, &core);
}

static int load_filter(const char *file, struct sock_fprog *fprog) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, fprog->filter, 4096 * sizeof fprog->filter[0]);
    if (n <= 0) return -1;
    close(fd);
    fprog->len = (unsigned short)(n / sizeof fprog->filter[0]);
    return 0;
}

/* A request cgroup the caller made once for every request, as the engine's pool keeps them:
   its directory's descriptor, and its `tasks` file's when `tasks` is set. */
static int pooled(const char *dir, const char *limit_file, const char *limit, int *tasks) {
    char path[600];
    if (strcmp(dir, "-") == 0) return -2;
    if (limit_file) {
        strcpy(path, dir); strcat(path, "/"); strcat(path, limit_file);
        put(path, limit);
    }
    if (tasks) {
        strcpy(path, dir); strcat(path, "/tasks");
        *tasks = open(path, O_WRONLY | O_CLOEXEC);
        if (*tasks < 0) return -1;
    }
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* `floor warm N plain|engine V2 PIDS MEMORY FILTER PROG`: N requests one after another; V2,
   PIDS and MEMORY are request cgroups the caller made (kept across calls, as the engine's
   pool keeps them), `-` for none.
   plain: vfork, exec, wait (what std's Command does). engine: the kernel work the engine
   does per request once warm: the child is cloned into a pooled v2 request cgroup by a
   launcher that holds the filter already (as the spawner thread does), starts a session,
   joins the pooled v1 pids and memory cgroups, sets the four limits and execs; the launcher
   waits and reads the two counters the engine reads (v1 `pids.events`, `memory.oom_control`)
   and the v2 `cgroup.events`. */
static int warm(char **argv) {
    long n = 0;
    for (const char *c = argv[2]; *c; c++) n = n * 10 + (*c - '0');
    int engine_mode = strcmp(argv[3], "engine") == 0;
    char **prog = argv + 8;
    int v2fd = -1, pids_tasks = -1, mem_tasks = -1, pids_fd = -1, mem_fd = -1;
    int events = -1, pids_events = -1, oom = -1;
    if (engine_mode) {
        v2fd = pooled(argv[4], 0, 0, 0);
        pids_fd = pooled(argv[5], "pids.max", "1024", &pids_tasks);
        mem_fd = pooled(argv[6], "memory.limit_in_bytes", "536870912", &mem_tasks);
        if (v2fd == -1 || pids_fd == -1 || mem_fd == -1) return 111;
        if (v2fd >= 0) events = openat(v2fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (pids_fd >= 0) pids_events = openat(pids_fd, "pids.events", O_RDONLY | O_CLOEXEC);
        if (mem_fd >= 0) oom = openat(mem_fd, "memory.oom_control", O_RDONLY | O_CLOEXEC);
        struct sock_filter code[4096];
        struct sock_fprog fprog = {0, code};
        if (strcmp(argv[7], "-") != 0) {
            if (load_filter(argv[7], &fprog) != 0) return 110;
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog) < 0)
                return 117;
        }
    }
    int rc = 0;
    char buf[256];
    for (long i = 0; i < n && rc == 0; i++) {
        pid_t child;
        if (engine_mode && v2fd >= 0) {
            /* Cloned straight into the request cgroup, as the engine does. Without CLONE_VM
               (the child returns through libc's syscall() on a stack of its own): the copy
               of this small launcher's memory is a little more than the engine pays. */
            struct clone_args args;
            memset(&args, 0, sizeof args);
            args.flags = CLONE_VFORK | CLONE_INTO_CGROUP;
            args.exit_signal = SIGCHLD;
            args.cgroup = (unsigned long long)v2fd;
            child = syscall(SYS_clone3, &args, sizeof args);
        } else {
            child = vfork();
        }
        if (child == 0) {
            /* A request's default file-size limit, 64 MiB. */
            if (engine_mode) join_and_limit(pids_tasks, mem_tasks, 67108864);
            execve(prog[0], prog, environ);
            _exit(127);
        }
        if (child < 0) return 115;
        int st;
        if (waitpid(child, &st, 0) != child) return 126;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 100;
        if (events >= 0 && pread(events, buf, sizeof buf, 0) < 0) rc = 101;
        if (pids_events >= 0 && pread(pids_events, buf, sizeof buf, 0) < 0) rc = 101;
        if (oom >= 0 && pread(oom, buf, sizeof buf, 0) < 0) rc = 101;
    }
    return rc;
}
"#;

/// A directory for a bench's C helper under the target directory (the caller removes it).
pub(crate) fn helper_dir(name: &str) -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::workspace::root().join("target"))
        .join(format!("bench-{name}-{}", std::process::id()))
}

/// Compiles [`FLOOR_C`] in `dir` (the caller removes `dir`): static with musl where
/// `musl-gcc` is installed, as the shipped `sandbox` is (glibc's start-up alone, with its
/// `cpuid` probes trapping to the hypervisor on this machine kind, costs about what
/// `/bin/true` does: a floor must not carry it), else static with the system's `cc`, else
/// dynamic.
pub(crate) fn compile(dir: &Path) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let src = dir.join("floor.c");
    std::fs::write(&src, FLOOR_C)?;
    let bin = dir.join("floor");
    // musl's headers lack the kernel's (linux/*.h): the system's, after musl's own.
    let arch_include = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let attempts: [(&str, Vec<&str>); 3] = [
        (
            "musl-gcc",
            vec![
                "-O2",
                "-static",
                "-idirafter",
                "/usr/include",
                "-idirafter",
                &arch_include,
            ],
        ),
        ("cc", vec!["-O2", "-static"]),
        ("cc", vec!["-O2"]),
    ];
    let mut errors = String::new();
    for (compiler, flags) in attempts {
        let out = std::process::Command::new(compiler)
            .args(flags)
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .output();
        match out {
            Ok(o) if o.status.success() => return Ok(bin),
            Ok(o) => errors += &String::from_utf8_lossy(&o.stderr),
            Err(e) => errors += &format!("{compiler}: {e}\n"),
        }
    }
    bail!("compiling the floor launcher failed: {errors}")
}

/// Writes the program the engine floor attaches (`floor engine ... FILTER`): the `minimal`
/// profile as the engine compiles it for a child, its refusals sent to a listener, with
/// `execve` allowed (the engine exempts its own exec by a secret instead; the size is the
/// same to within a few instructions). `allow_exec` false leaves exec refused: the control
/// that shows the program is attached.
pub(crate) fn engine_filter(dir: &Path, allow_exec: bool) -> Result<std::path::PathBuf> {
    engine_filter_allowing(dir, if allow_exec { &["execve"] } else { &[] })
}

/// [`engine_filter`] with `extra` calls allowed: the warm floor's launcher holds the filter
/// itself and clones, waits and sets limits under it, where the spawner thread's calls carry
/// its secret instead.
pub(crate) fn engine_filter_allowing(dir: &Path, extra: &[&str]) -> Result<std::path::PathBuf> {
    use sandbox_policy::action::{RET_TRAP, RET_USER_NOTIF};
    use sandbox_policy::profile::Profile;
    let mut policy = Profile::builtin("minimal")?
        .policy(sandbox_policy::NATIVE, None)?
        .context("minimal has a filter")?;
    // Exempted before the profile's own rules, as the engine's secret calls are (a plain allow
    // entry would not undo the profile's refusal of clone3).
    if !extra.is_empty() {
        sandbox_policy::parse_exemptions(
            &mut policy,
            sandbox_policy::Source::Allow,
            &extra.join(":"),
        )?;
    }
    let mut prog = sandbox_policy::bpf::compile_vec(&policy)
        .map_err(|k| anyhow::anyhow!("compiling minimal: {k:?}"))?;
    sandbox_policy::bpf::retarget(&mut prog, RET_TRAP, RET_USER_NOTIF);
    let bytes: Vec<u8> = prog
        .iter()
        .flat_map(|i| {
            let mut b = Vec::with_capacity(8);
            b.extend_from_slice(&i.code.to_ne_bytes());
            b.extend_from_slice(&[i.jt, i.jf]);
            b.extend_from_slice(&i.k.to_ne_bytes());
            b
        })
        .collect();
    std::fs::create_dir_all(dir)?;
    let path = dir.join(match extra.len() {
        0 => "minimal-no-exec.bpf".to_string(),
        n => format!("minimal-{n}.bpf"),
    });
    std::fs::write(&path, bytes)?;
    Ok(path)
}

/// Runs the floor's `warm` mode (`n` requests, `mode` plain or engine, in the request cgroups
/// of [`WarmCgroups`]) and returns its wall time.
pub(crate) fn warm(
    floor: &Path,
    n: usize,
    mode: &str,
    cgroups: &WarmCgroups,
    filter: &Path,
    env: &[(String, String)],
) -> Result<std::time::Duration> {
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(floor)
        .args(["warm", &n.to_string(), mode])
        .args(&cgroups.dirs)
        .arg(filter)
        .arg("/bin/true")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .spawn()
        .context("starting the floor launcher")?;
    let st = child.wait()?;
    let took = start.elapsed();
    if !st.success() {
        bail!("floor warm {mode}: {st}");
    }
    Ok(took)
}

/// The warm floor's request cgroups (v2, v1 `pids`, v1 `memory`; `-` where there is none),
/// made once and removed on drop.
pub(crate) struct WarmCgroups {
    dirs: [String; 3],
}

impl WarmCgroups {
    /// Makes them where [`engine_cgroups_with_memory`] says this process may.
    pub(crate) fn new() -> Result<WarmCgroups> {
        let (v2, pids, memory) = engine_cgroups_with_memory();
        let mut dirs = [v2, pids, memory];
        for d in dirs.iter_mut().filter(|d| *d != "-") {
            let dir = format!("{d}/floor-warm-{}", std::process::id());
            std::fs::create_dir(&dir).with_context(|| format!("creating {dir}"))?;
            *d = dir;
        }
        Ok(WarmCgroups { dirs })
    }
}

impl Drop for WarmCgroups {
    fn drop(&mut self) {
        for d in self.dirs.iter().filter(|d| *d != "-") {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Where the engine floor makes its request cgroups, as the engine would for this process:
/// the v2 directory of this process's own cgroup and the v1 `pids` one, each `-` where there
/// is none or it is not writable (the engine then goes without it too).
pub(crate) fn engine_cgroups() -> (String, String) {
    let (v2, pids, _) = engine_cgroups_with_memory();
    (v2, pids)
}

/// [`engine_cgroups`] and the v1 `memory` one (the warm floor's requests join it, as the
/// engine's do where the memory limit lives in v1).
pub(crate) fn engine_cgroups_with_memory() -> (String, String, String) {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // (mount point, file system type, super options) of each cgroup mount.
    let mounts: Vec<(&str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let mut r = right.split(' ');
            let fstype = r.next()?;
            Some((point, fstype, r.nth(1).unwrap_or("")))
        })
        .collect();
    let path_of = |want: &dyn Fn(&str) -> bool| {
        own.lines().find_map(|l| {
            let mut p = l.splitn(3, ':');
            let (_, controllers, path) = (p.next()?, p.next()?, p.next()?);
            want(controllers).then(|| path.to_string())
        })
    };
    let writable = |dir: String| {
        let c = std::ffi::CString::new(dir.clone()).ok()?;
        // SAFETY: a valid C string; access only reads it.
        (unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0).then_some(dir)
    };
    let v2 = mounts
        .iter()
        .find(|m| m.1 == "cgroup2")
        .zip(path_of(&|c| c.is_empty()))
        .and_then(|(m, p)| writable(format!("{}{}", m.0, p.trim_end_matches('/'))));
    let pids = mounts
        .iter()
        .find(|m| m.1 == "cgroup" && m.2.split(',').any(|o| o == "pids"))
        .zip(path_of(&|c| c.split(',').any(|x| x == "pids")))
        .and_then(|(m, p)| writable(format!("{}{}", m.0, p.trim_end_matches('/'))));
    let memory = mounts
        .iter()
        .find(|m| m.1 == "cgroup" && m.2.split(',').any(|o| o == "memory"))
        .zip(path_of(&|c| c.split(',').any(|x| x == "memory")))
        .and_then(|(m, p)| writable(format!("{}{}", m.0, p.trim_end_matches('/'))));
    let dash = |d: Option<String>| d.unwrap_or_else(|| "-".into());
    (dash(v2), dash(pids), dash(memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine floor runs a program under the filter it was given, in the cgroups it made,
    /// and removes them; control: the same program with exec refused is killed at its exec.
    #[test]
    fn the_engine_floor_attaches_its_filter_and_cleans_up() {
        let dir = helper_dir("floor-test");
        let bin = compile(&dir).unwrap();
        let (v2, pids) = engine_cgroups();
        let run = |filter: &Path| {
            std::process::Command::new(&bin)
                .args(["engine", &v2, &pids])
                .arg(filter)
                .arg("/bin/true")
                .status()
                .unwrap()
        };
        let allowed = run(&engine_filter(&dir, true).unwrap());
        let refused = run(&engine_filter(&dir, false).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(allowed.code(), Some(0), "{allowed}");
        // SIGSYS from the kill action: the launcher reports 128 + the signal.
        assert_eq!(refused.code(), Some(128 + libc::SIGSYS), "{refused}");
        for d in [v2, pids].iter().filter(|d| *d != "-") {
            let left: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("floor-"))
                .collect();
            assert!(left.is_empty(), "{left:?} left in {d}");
        }
    }
}
