//! `sandbox export --format oci` given to a real container runtime: runc (Debian's, with
//! libseccomp) runs a container from a busybox-static root filesystem with the exported
//! profile as `linux.seccomp`. Every refusal has a control: the same container without the
//! seccomp section, where the call works. The container's process runs as nobody (65534), as
//! root would pass permission checks the calls are compared against. Needs root (runc) and the
//! Debian packages runc and busybox-static (.ci/packages).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

/// A static program that makes one system call from its arguments and prints the result:
/// `probe NR [ARG...]`, each ARG a number or `s:TEXT` (a pointer to TEXT).
const PROBE_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long a[6] = {0};
    for (int i = 0; i < 6 && i + 2 < argc; i++)
        a[i] = strncmp(argv[i + 2], "s:", 2) == 0 ? (long)(argv[i + 2] + 2)
                                                   : (long)strtoul(argv[i + 2], 0, 0);
    long r = syscall(strtol(argv[1], 0, 0), a[0], a[1], a[2], a[3], a[4], a[5]);
    printf("ret=%s errno=%d\n", r < 0 ? "-1" : "ok", r < 0 ? errno : 0);
    return 0;
}
"#;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A bundle directory: rootfs with busybox and the probe, and runc's default config.
struct Bundle {
    dir: tempfile::TempDir,
}

impl Bundle {
    fn new() -> Bundle {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        for d in ["bin", "tmp", "proc", "dev", "sys"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        std::fs::copy("/bin/busybox", root.join("bin/busybox"))
            .expect("busybox-static is installed (.ci/packages)");
        for applet in ["sh", "echo", "cat", "ls"] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
        }
        let src = dir.path().join("probe.c");
        std::fs::write(&src, PROBE_C).unwrap();
        for (name, flags) in [
            ("probe", &["-static"][..]),
            ("probe32", &["-static", "-m32"]),
        ] {
            let o = Command::new("gcc")
                .args(flags)
                .arg("-o")
                .arg(root.join("bin").join(name))
                .arg(&src)
                .output()
                .expect("gcc (and gcc-multilib for -m32)");
            assert!(o.status.success(), "{o:?}");
        }
        let o = Command::new("runc")
            .args(["spec", "--bundle"])
            .arg(dir.path())
            .output()
            .expect("runc is installed (.ci/packages)");
        assert!(o.status.success(), "runc spec: {o:?}");
        Bundle { dir }
    }

    /// Runs `args` in a container with `seccomp` as `linux.seccomp` (none when `None`).
    fn run(&self, seccomp: Option<&serde_json::Value>, args: &[&str]) -> Output {
        self.run_as(65534, seccomp, args)
    }

    /// [`Bundle::run`] as another user: busybox, started by anyone but root, drops set-id
    /// privileges it does not have (setgid, setuid), which the profiles stop.
    fn run_as(&self, uid: u32, seccomp: Option<&serde_json::Value>, args: &[&str]) -> Output {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = self.dir.path().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["process"]["terminal"] = false.into();
        config["process"]["args"] = serde_json::json!(args);
        config["process"]["user"] = serde_json::json!({"uid": uid, "gid": uid});
        config["root"]["readonly"] = false.into();
        match seccomp {
            Some(s) => config["linux"]["seccomp"] = s.clone(),
            None => {
                config["linux"].as_object_mut().unwrap().remove("seccomp");
            }
        }
        std::fs::write(&path, config.to_string()).unwrap();
        let id = format!(
            "sandbox-oci-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let o = Command::new("runc")
            .args(["run", "--bundle"])
            .arg(self.dir.path())
            .arg(&id)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = Command::new("runc").args(["delete", "-f", &id]).output();
        o
    }
}

fn export(args: &[&str]) -> (serde_json::Value, String) {
    let o = Command::new(SANDBOX)
        .args(["export", "--format", "oci"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    (
        serde_json::from_slice(&o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn runnable() -> Option<Bundle> {
    if !is_root() {
        eprintln!("skipped: runc needs root");
        return None;
    }
    Some(Bundle::new())
}

const SIGSYS_STATUS: i32 = 128 + libc::SIGSYS;

/// A probe: what, its arguments, the result under the profile, the result without it.
type Case<'a> = (&'a str, Vec<&'a str>, Result<&'a str, i32>, &'a str);

#[test]
fn an_exported_profile_runs_allowed_commands_and_stops_forbidden_calls_under_runc() {
    let Some(b) = runnable() else { return };
    let (shell, notes) = export(&["--profile", "shell"]);
    // Exactly, but for the one call runc needs (docs/containers.md).
    assert_eq!(notes.lines().count(), 1, "{notes}");
    assert!(
        notes.starts_with("sandbox: export: added to the allow list: capset "),
        "{notes}"
    );

    // Allowed: a shell pipeline (fork, exec, pipes) runs.
    let o = b.run_as(0, Some(&shell), &["/bin/sh", "-c", "echo hello | cat"]);
    assert_eq!(
        (o.status.code(), out(&o).as_str()),
        (Some(0), "hello\n"),
        "{o:?}"
    );

    // (name, argv, under the profile: the line printed or the exit status, without it)
    let socket = libc::SYS_socket.to_string();
    let ioctl = libc::SYS_ioctl.to_string();
    let cases: &[Case] = &[
        // shell has no network: an AF_INET socket stops the program.
        (
            "inet socket",
            vec![&socket, "2", "1", "0"],
            Err(SIGSYS_STATUS),
            "ret=ok",
        ),
        // A Unix socket is refused with EACCES, and the program carries on.
        (
            "unix socket",
            vec![&socket, "1", "1", "0"],
            Ok("ret=-1 errno=13"),
            "ret=ok",
        ),
        // TIOCSTI with the upper half of the 64-bit register set: the 32-bit rule still
        // refuses it (EPERM); without the filter the kernel reads the low half (ENOTTY on
        // /dev/null).
        (
            "TIOCSTI, high bits",
            vec![&ioctl, "0", "0x100005412", "s:x"],
            Ok("ret=-1 errno=1"),
            "ret=-1 errno=25",
        ),
    ];
    for (what, argv, want, control) in cases {
        let argv: Vec<&str> = std::iter::once("/bin/probe")
            .chain(argv.iter().copied())
            .collect();
        let o = b.run(Some(&shell), &argv);
        match want {
            Ok(line) => assert_eq!(
                (o.status.code(), out(&o).trim()),
                (Some(0), *line),
                "{what}: {o:?}"
            ),
            Err(code) => assert_eq!(o.status.code(), Some(*code), "{what}: {o:?}"),
        }
        let o = b.run(None, &argv);
        assert!(
            out(&o).starts_with(control),
            "{what} without the filter: {o:?}"
        );
    }
}

#[test]
fn x32_and_i386_calls_are_killed_under_runc() {
    let Some(b) = runnable() else { return };
    let (shell, _) = export(&["--profile", "shell"]);
    assert_eq!(
        shell["architectures"],
        serde_json::json!(["SCMP_ARCH_X86_64"])
    );
    // getpid through the x32 ABI (bit 30): without the filter the kernel answers it (or
    // says ENOSYS where x32 is compiled out); with it, libseccomp's architecture check kills.
    let x32_getpid = format!("{}", 0x4000_0000 | libc::SYS_getpid);
    let o = b.run(None, &["/bin/probe", &x32_getpid]);
    assert!(
        o.status.success() && out(&o).starts_with("ret="),
        "control: {o:?}"
    );
    let o = b.run(Some(&shell), &["/bin/probe", &x32_getpid]);
    assert_eq!(o.status.code(), Some(SIGSYS_STATUS), "{o:?}");
    // A 32-bit program (i386 ABI, getpid is 20 there): killed before it prints anything.
    let o = b.run(None, &["/bin/probe32", "20"]);
    assert_eq!(out(&o).trim(), "ret=ok errno=0", "control: {o:?}");
    let o = b.run(Some(&shell), &["/bin/probe32", "20"]);
    assert_eq!(o.status.code(), Some(SIGSYS_STATUS), "{o:?}");
}

#[test]
fn a_read_only_profile_cannot_start_a_container_and_export_says_so() {
    let Some(b) = runnable() else { return };
    // runc opens its exec fifo write-only and then calls execve after installing the filter;
    // minimal refuses both, which export says, and runc indeed fails to start.
    let (minimal, notes) = export(&["--profile", "minimal"]);
    assert!(
        notes.contains("refuses a write-only openat (errno:EROFS) and execve (kill)"),
        "{notes}"
    );
    let o = b.run(Some(&minimal), &["/bin/probe", "39"]);
    assert!(!o.status.success() && out(&o).is_empty(), "{o:?}");
    let o = b.run(None, &["/bin/probe", "39"]);
    assert_eq!(out(&o).trim(), "ret=ok errno=0", "control: {o:?}");
}

#[test]
fn an_imported_then_exported_moby_profile_runs_under_runc() {
    let Some(b) = runnable() else { return };
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("moby.toml");
    let moby = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy/tests/data/moby/default.json");
    let o = Command::new(SANDBOX)
        .arg("import")
        .arg(&moby)
        .arg("--out")
        .arg(&toml)
        .output()
        .unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "{o:?}");
    let (json, notes) = export(&["--profile", toml.to_str().unwrap()]);
    assert!(notes.is_empty(), "{notes}");
    let o = b.run_as(
        0,
        Some(&json),
        &["/bin/sh", "-c", "echo ok; ls /bin >/dev/null"],
    );
    assert_eq!(out(&o), "ok\n", "{o:?}");
    // Docker refuses new namespaces with EPERM: unshare(CLONE_NEWUSER).
    let unshare = libc::SYS_unshare.to_string();
    let newuser = libc::CLONE_NEWUSER.to_string();
    let o = b.run(Some(&json), &["/bin/probe", &unshare, &newuser]);
    assert_eq!(out(&o).trim(), "ret=-1 errno=1", "{o:?}");
    let o = b.run(None, &["/bin/probe", &unshare, &newuser]);
    assert_ne!(out(&o).trim(), "ret=-1 errno=1", "control: {o:?}");
}
