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
pub(crate) const FLOOR_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) _exit(120);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
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
"#;

/// A directory for a bench's C helper under the target directory (the caller removes it).
pub(crate) fn helper_dir(name: &str) -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::workspace::root().join("target"))
        .join(format!("bench-{name}-{}", std::process::id()))
}

/// Compiles [`FLOOR_C`] with `cc -O2` in `dir`; the caller removes `dir`.
pub(crate) fn compile(dir: &Path) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let src = dir.join("floor.c");
    std::fs::write(&src, FLOOR_C)?;
    let bin = dir.join("floor");
    let out = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .context("running cc")?;
    if !out.status.success() {
        bail!("cc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(bin)
}
