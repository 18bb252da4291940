//! `sandbox` inside containers shaped like the two places agents are deployed, run by runc on
//! the real kernel:
//!
//! - **docker**: Docker's default capabilities, the moby default seccomp profile
//!   (`/work/shared/data/moby-seccomp/default.json`, or the copy under `policy/tests/data`)
//!   turned into `linux.seccomp` as dockerd does for a container without `CAP_SYS_ADMIN`
//!   (it answers `clone3` with ENOSYS and refuses `unshare` and `clone` with namespace flags),
//!   and runc's default masked and read-only `/proc` paths;
//! - **kubernetes**: a pod with seccomp `Unconfined` (no filter), the same capabilities and the
//!   same masked `/proc`, which refuses a fresh `/proc` to a user namespace.
//!
//! In each, as root and as uid 1000: `sandbox run` works and names its tier (contained: the
//! namespaces are refused), `sandbox check` reports the same tier and exit status, `exec
//! --json` works, and Landlock still refuses a credential read and a write outside the
//! workspace; the controls do the same read and write without the sandbox, which succeed.
//!
//! Where only `clone3` is refused (a filter answering ENOSYS, as older container profiles do,
//! that leaves namespaces alone), runs take the `clone` path and keep the isolated tier and
//! their cgroup; that test needs no runc.
//!
//! The root file system is a minimal one: the host's `/usr` and `/etc` and the directory of the
//! binary under test bound read-only, a home and a workspace bound writable. Needs runc
//! (.ci/packages); skipped, saying so, without it.

mod common;

use common::moby::docker_seccomp;
use common::SANDBOX;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Docker's default capabilities (moby `oci/caps/defaults.go`), as the profile import knows
/// them.
use sandbox_policy::oci::DOCKER_DEFAULT_CAPS as DOCKER_CAPS;

/// What the credential file holds.
const SECRET: &str = "PRIVATE-KEY-MATERIAL";

/// What the static root's `/etc/shadow` holds.
const HASH: &str = "PASSWORD-HASH-MATERIAL";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Docker,
    Kubernetes,
    /// As `Kubernetes`, with runc's read-only `/proc` paths but none masked: nothing tells the
    /// host in advance that a fresh `/proc` will be refused, so the first spawn finds it.
    ReadOnlyProc,
    /// As `Docker`, with what gVisor answers that the kernel would not: the `landlock_*` calls
    /// ENOSYS, `seccomp()` with `SECCOMP_FILTER_FLAG_NEW_LISTENER`, `LOG` or `SPEC_ALLOW`
    /// EINVAL ([`gvisor_seccomp`]).
    GVisor,
    /// Docker's capabilities and masked `/proc`, with the filter `sandbox export` wrote to
    /// the bundle's `exported.json` (and no_new_privs unset, as Docker leaves it).
    Exported,
    /// As `Docker`, on a root of static programs only ([`Bundle::static_root`]): busybox,
    /// the sandbox binary and the libraries it alone needs.
    Static,
}

/// `SECCOMP_FILTER_FLAG_LOG`, `SPEC_ALLOW` and `NEW_LISTENER`: the flags gVisor refuses.
const GVISOR_REFUSED_FLAGS: [u64; 3] = [2, 4, 8];

/// Docker's filter with gVisor's answers: the `landlock_*` calls and `seccomp` taken out of
/// the allow entries (under runc an entry without arguments overrides those with them), the
/// `landlock_*` calls answered ENOSYS, `seccomp` answered EINVAL when the flags argument holds
/// one of [`GVISOR_REFUSED_FLAGS`] and allowed when it holds none (one `SCMP_CMP_MASKED_EQ`
/// comparison per entry: runc splits repeated ones into rules that each allow alone).
fn gvisor_seccomp() -> serde_json::Value {
    let mut f = docker_seccomp(DOCKER_CAPS);
    let taken = [
        "seccomp",
        "landlock_create_ruleset",
        "landlock_add_rule",
        "landlock_restrict_self",
    ];
    for rule in f["syscalls"].as_array_mut().unwrap() {
        let names = rule["names"].as_array_mut().unwrap();
        names.retain(|n| !taken.contains(&n.as_str().unwrap()));
    }
    let rules = f["syscalls"].as_array_mut().unwrap();
    rules.retain(|r| !r["names"].as_array().unwrap().is_empty());
    rules.push(serde_json::json!({
        "names": &taken[1..], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::ENOSYS
    }));
    for flag in GVISOR_REFUSED_FLAGS {
        rules.push(serde_json::json!({
            "names": ["seccomp"], "action": "SCMP_ACT_ERRNO", "errnoRet": libc::EINVAL,
            "args": [{"index": 1, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]
        }));
    }
    let all: u64 = GVISOR_REFUSED_FLAGS.iter().sum();
    rules.push(serde_json::json!({
        "names": ["seccomp"], "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 1, "value": all, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]
    }));
    f
}

/// A bundle: the minimal root, a home with a credential, a workspace, runc's default config.
struct Bundle {
    dir: tempfile::TempDir,
}

impl Bundle {
    fn new() -> Bundle {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        for d in [
            "usr", "etc", "proc", "dev", "sys", "tmp", "home/u", "ws", "t",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        // Debian's merged /usr: the top-level program and library directories are links.
        for l in ["bin", "sbin", "lib", "lib64", "lib32", "libx32"] {
            if Path::new("/").join(l).exists() {
                std::os::unix::fs::symlink(format!("usr/{l}"), root.join(l)).unwrap();
            }
        }
        for (name, uid) in [("root-home", 0), ("home", 1000)] {
            let home = dir.path().join(name);
            std::fs::create_dir_all(home.join(".ssh")).unwrap();
            std::fs::write(home.join(".ssh/id_ed25519"), SECRET).unwrap();
            for p in [
                home.clone(),
                home.join(".ssh"),
                home.join(".ssh/id_ed25519"),
            ] {
                std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
            }
        }
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::os::unix::fs::chown(dir.path().join("ws"), Some(1000), Some(1000)).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.path().join("tmp"),
            std::fs::Permissions::from_mode(0o1777),
        )
        .unwrap();
        let o = Command::new("runc")
            .args(["spec", "--bundle"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "runc spec: {o:?}");
        // Every container starts from runc's default config, kept aside.
        std::fs::rename(
            dir.path().join("config.json"),
            dir.path().join("default.json"),
        )
        .unwrap();
        let srv = dir.path().join("srv");
        std::fs::create_dir_all(&srv).unwrap();
        std::fs::set_permissions(&srv, std::fs::Permissions::from_mode(0o777)).unwrap();
        Bundle { dir }
    }

    /// A root of static programs, made on first use: busybox-static as every tool (`/bin/sh`
    /// included), an `/etc/shadow` holding [`HASH`], and the glibc the sandbox binary under
    /// test links against (the binary, under `/t`, is the only dynamic program).
    fn static_root(&self) -> PathBuf {
        let root = self.dir.path().join("static-root");
        if root.exists() {
            return root;
        }
        for d in [
            "bin",
            "etc",
            "proc",
            "dev",
            "sys",
            "tmp",
            "home/u",
            "ws",
            "t",
            "srv",
            "lib/x86_64-linux-gnu",
            "lib64",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox"))
            .expect("busybox-static is installed");
        for applet in ["sh", "cat", "echo", "ls", "true", "id"] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
        }
        let shadow = root.join("etc/shadow");
        std::fs::write(&shadow, format!("root:{HASH}:19000::::::\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::write(root.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ] {
            std::fs::copy(lib, root.join(&lib[1..])).unwrap();
        }
        root
    }

    /// Runs `args` in a container of `shape` as `uid` (root with Docker's capabilities, any
    /// other user with none, as Docker gives them), in the workspace `/ws`, HOME `/home/u`.
    fn run(&self, shape: Shape, uid: u32, args: &[&str], stdin: Option<&[u8]>) -> Output {
        self.run_env(shape, uid, args, stdin, &[])
    }

    /// As [`Bundle::run`], with `env` (`NAME=value`) added to the environment.
    fn run_env(
        &self,
        shape: Shape,
        uid: u32,
        args: &[&str],
        stdin: Option<&[u8]>,
        env: &[&str],
    ) -> Output {
        let path = self.dir.path().join("config.json");
        // Each user has a home of its own (what root's runs leave there is root's).
        let home = if uid == 0 { "root-home" } else { "home" };
        let default = self.dir.path().join("default.json");
        let mut c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(default).unwrap()).unwrap();
        let caps = serde_json::json!(DOCKER_CAPS);
        c["process"]["terminal"] = false.into();
        c["process"]["args"] = serde_json::json!(args);
        c["process"]["user"] = serde_json::json!({"uid": uid, "gid": uid});
        c["process"]["cwd"] = "/ws".into();
        let mut vars = vec![
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "HOME=/home/u",
            "LANG=C.UTF-8",
        ];
        vars.extend_from_slice(env);
        c["process"]["env"] = serde_json::json!(vars);
        c["process"]["noNewPrivileges"] = false.into();
        c["process"]["capabilities"] = if uid == 0 {
            serde_json::json!({"bounding": caps, "effective": caps, "permitted": caps})
        } else {
            serde_json::json!({"bounding": caps})
        };
        let root = if shape == Shape::Static {
            self.static_root()
        } else {
            self.dir.path().join("rootfs")
        };
        c["root"] = serde_json::json!({"path": root, "readonly": true});
        // The host's cgroup hierarchies are not the container's business here (a v1 host's
        // cannot be mounted into a root this minimal); the sandbox then finds none to use.
        let mut mounts: Vec<serde_json::Value> = c["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["destination"] != "/sys/fs/cgroup")
            .cloned()
            .collect();
        let bin = Path::new(SANDBOX).parent().unwrap();
        for (src, dst, mode) in [
            (PathBuf::from("/usr"), "/usr", "ro"),
            (PathBuf::from("/etc"), "/etc", "ro"),
            (bin.to_path_buf(), "/t", "ro"),
            (self.dir.path().join(home), "/home/u", "rw"),
            (self.dir.path().join("ws"), "/ws", "rw"),
            (self.dir.path().join("tmp"), "/tmp", "rw"),
            (self.dir.path().join("srv"), "/srv", "rw"),
        ] {
            if shape == Shape::Static && (dst == "/usr" || dst == "/etc") {
                continue;
            }
            mounts.push(serde_json::json!({
                "destination": dst, "type": "bind", "source": src, "options": ["rbind", mode]
            }));
        }
        c["mounts"] = mounts.into();
        match shape {
            Shape::Docker | Shape::Static => c["linux"]["seccomp"] = docker_seccomp(DOCKER_CAPS),
            Shape::GVisor => c["linux"]["seccomp"] = gvisor_seccomp(),
            Shape::Exported => {
                let f = std::fs::read_to_string(self.dir.path().join("exported.json")).unwrap();
                c["linux"]["seccomp"] = serde_json::from_str(&f).unwrap();
            }
            Shape::Kubernetes | Shape::ReadOnlyProc => {
                c["linux"].as_object_mut().unwrap().remove("seccomp");
            }
        }
        assert!(
            c["linux"]["maskedPaths"]
                .as_array()
                .is_some_and(|m| m.iter().any(|p| p == "/proc/kcore")),
            "runc's default config masks /proc"
        );
        if shape == Shape::ReadOnlyProc {
            c["linux"]["maskedPaths"] = serde_json::json!([]);
        }
        std::fs::write(&path, c.to_string()).unwrap();
        common::runc::run(self.dir.path(), "sandbox-containers", stdin)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A bundle, or `None` (said on stderr) when runc is not installed.
fn runnable() -> Option<Bundle> {
    common::runc::available().then(Bundle::new)
}

/// Everything the task asks of one container shape, as root and as uid 1000. `why` is what
/// the degraded run must name as the reason namespaces are missing.
fn contained_tier_holds(shape: Shape, why: &str) {
    let Some(b) = runnable() else { return };
    // The container is shaped as claimed: what refuses namespaces there does refuse them.
    // clone3 with arguments the kernel rejects (EINVAL) meets the filter first (ENOSYS).
    let clone3 = "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
                  l.syscall(435, None, 0); print(ctypes.get_errno())";
    let o = b.run(shape, 1000, &["python3", "-c", clone3], None);
    let want = if shape == Shape::Docker {
        "38\n"
    } else {
        "22\n"
    };
    assert_eq!(text(&o.stdout), want, "{shape:?}: clone3: {o:?}");
    // A fresh /proc in new user, PID and mount namespaces (util-linux's unshare).
    let fresh_proc = [
        "unshare",
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--mount",
        "--mount-proc",
        "true",
    ];
    let o = b.run(shape, 1000, &fresh_proc, None);
    assert!(!o.status.success(), "{shape:?}: {o:?}");
    let o = Command::new(fresh_proc[0])
        .args(&fresh_proc[1..])
        .output()
        .unwrap();
    assert!(o.status.success(), "outside the container it works: {o:?}");
    for uid in [0, 1000] {
        let who = format!("{shape:?} as uid {uid}");
        // A default-shaped run works, in the contained tier, and says why in one line.
        let o = b.run(
            shape,
            uid,
            &[
                "/t/sandbox",
                "run",
                "-v",
                "--profile",
                "minimal",
                "--",
                "/bin/true",
            ],
            None,
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        assert!(err.contains("tier: contained"), "{who}: {err}");
        let warning: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("namespaces unavailable"))
            .collect();
        assert_eq!(warning.len(), 1, "{who}: {err}");
        assert!(
            warning[0].contains("ran in the contained tier"),
            "{who}: {err}"
        );
        assert!(warning[0].contains(why), "{who}: {err}");
        // Required refuses, with the same reason.
        let o = b.run(
            shape,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--isolation",
                "required",
                "--",
                "/bin/true",
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(125), "{who}: {o:?}");
        assert!(text(&o.stderr).contains(why), "{who}: {o:?}");

        // check: the same tier, and success, as the run.
        let o = b.run(shape, uid, &["/t/sandbox", "check", "--json"], None);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["ok"], true, "{who}: {report}");
        assert_eq!(report["tier"], "contained", "{who}: {report}");
        assert_eq!(report["run"]["exit_code"], 0, "{who}: {report}");

        // exec --json: the result names the tier and the reason. Root below the isolated
        // tier is refused unless the request says `allow_root`.
        if uid == 0 {
            let o = b.run(
                shape,
                uid,
                &["/t/sandbox", "exec", "--json"],
                Some(br#"{"argv": ["/bin/echo", "hi"], "profile": "minimal"}"#),
            );
            assert!(
                text(&o.stdout).contains(r#""field":"allow_root""#),
                "{who}: {o:?}"
            );
        }
        let o = b.run(
            shape,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(br#"{"argv": ["/bin/echo", "hi"], "profile": "minimal", "allow_root": true}"#),
        );
        let result: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(result["exit_code"], 0, "{who}: {result}");
        assert_eq!(result["stdout"], "hi\n", "{who}: {result}");
        assert_eq!(result["tier"], "contained", "{who}: {result}");
        assert!(
            result["warnings"].to_string().contains(why),
            "{who}: {result}"
        );

        // Landlock holds without namespaces: the credential cannot be read...
        let read = "cat /home/u/.ssh/id_ed25519";
        let o = b.run(
            shape,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--profile",
                "shell",
                "--",
                "bash",
                "-c",
                read,
            ],
            None,
        );
        assert!(!text(&o.stdout).contains(SECRET), "{who}: {o:?}");
        assert_ne!(o.status.code(), Some(0), "{who}: {o:?}");
        // ...which the same command reads without the sandbox (the control).
        let o = b.run(shape, uid, &["bash", "-c", read], None);
        assert_eq!(text(&o.stdout), SECRET, "{who}: control: {o:?}");

        // A write outside the workspace is refused, one inside is not.
        let outside = format!("echo x > /home/u/outside-{uid}");
        let o = b.run(
            shape,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--profile",
                "shell",
                "--",
                "bash",
                "-c",
                &format!("echo in > /ws/inside-{uid} && {outside}"),
            ],
            None,
        );
        assert_ne!(o.status.code(), Some(0), "{who}: {o:?}");
        let home = b
            .dir
            .path()
            .join(if uid == 0 { "root-home" } else { "home" });
        assert!(
            !home.join(format!("outside-{uid}")).exists(),
            "{who}: {o:?}"
        );
        assert!(
            b.dir.path().join(format!("ws/inside-{uid}")).exists(),
            "{who}: {o:?}"
        );
        let o = b.run(shape, uid, &["bash", "-c", &outside], None);
        assert!(o.status.success(), "{who}: control: {o:?}");
        assert!(
            home.join(format!("outside-{uid}")).exists(),
            "{who}: control"
        );

        // A chmod outside the workspace is refused and named, on stderr and in `exec
        // --json`'s result (the supervisor's violation, with the field that allows it).
        let victim = format!("/srv/f-{uid}");
        let o = b.run(
            shape,
            uid,
            &[
                "bash",
                "-c",
                &format!("echo keep > {victim}; chmod 600 {victim}"),
            ],
            None,
        );
        assert!(o.status.success(), "{who}: {o:?}");
        let mode = || {
            use std::os::unix::fs::PermissionsExt;
            let p = b.dir.path().join(format!("srv/f-{uid}"));
            std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
        };
        let o = b.run(
            shape,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--profile",
                "shell",
                "--",
                "chmod",
                "666",
                &victim,
            ],
            None,
        );
        assert_ne!(o.status.code(), Some(0), "{who}: {o:?}");
        assert_eq!(mode(), 0o600, "{who}: {o:?}");
        let err = text(&o.stderr);
        assert!(
            err.lines().any(|l| l.starts_with("sandbox: ")
                && l.contains("fchmodat")
                && l.contains(&victim)),
            "{who}: the chmod is named: {err}"
        );
        let req = serde_json::json!({
            "argv": ["chmod", "666", victim],
            "profile": "shell",
            "allow_root": true,
        });
        let o = b.run(
            shape,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(req.to_string().as_bytes()),
        );
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(mode(), 0o600, "{who}: {r}");
        let entry = r["violations"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["syscall"] == "fchmodat"))
            .unwrap_or_else(|| panic!("{who}: {r}"));
        assert_eq!(
            entry["change"],
            format!("\"writable_paths\": [\"{victim}\"]"),
            "{who}: {r}"
        );
        // Control: the same chmod without the sandbox changes the mode.
        let o = b.run(shape, uid, &["chmod", "666", &victim], None);
        assert!(o.status.success(), "{who}: control: {o:?}");
        assert_eq!(mode(), 0o666, "{who}: control");
    }
}

#[test]
fn in_a_docker_shaped_container_runs_are_contained_and_say_why() {
    contained_tier_holds(Shape::Docker, "seccomp profile");
}

#[test]
fn in_a_kubernetes_pod_with_a_masked_proc_runs_are_contained_and_say_why() {
    contained_tier_holds(Shape::Kubernetes, "a fresh /proc is refused");
}

#[test]
fn where_nothing_predicts_the_refused_proc_the_first_spawn_finds_it() {
    let Some(b) = runnable() else { return };
    let why = "a fresh /proc is refused";
    for uid in [0, 1000] {
        let o = b.run(
            Shape::ReadOnlyProc,
            uid,
            &[
                "/t/sandbox",
                "run",
                "-v",
                "--profile",
                "minimal",
                "--",
                "/bin/true",
            ],
            None,
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "uid {uid}: {o:?}");
        assert!(err.contains("tier: contained"), "uid {uid}: {err}");
        assert!(err.contains(why), "uid {uid}: {err}");
        let o = b.run(
            Shape::ReadOnlyProc,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--isolation",
                "required",
                "--",
                "/bin/true",
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(125), "uid {uid}: {o:?}");
        assert!(text(&o.stderr).contains(why), "uid {uid}: {o:?}");
        let o = b.run(
            Shape::ReadOnlyProc,
            uid,
            &["/t/sandbox", "check", "--json"],
            None,
        );
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(o.status.code(), Some(0), "uid {uid}: {report}");
        assert_eq!(report["tier"], "contained", "uid {uid}: {report}");
    }
}

/// A program that installs a filter answering `clone3` with ENOSYS (and allowing everything
/// else), then execs its arguments.
const NO_CLONE3_C: &str = r#"
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 38),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) {
        perror("seccomp");
        return 125;
    }
    execvp(argv[1], argv + 1);
    perror("exec");
    return 127;
}
"#;

#[test]
fn where_only_clone3_is_refused_runs_keep_the_isolated_tier_and_their_cgroup() {
    use common::{command, sandbox, As, BOTH};
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = dir.path().join("no-clone3.c");
    let bin = dir.path().join("no-clone3");
    std::fs::write(&src, NO_CLONE3_C).unwrap();
    let o = Command::new("gcc")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // The filter does refuse clone3: ENOSYS under it, the kernel's EINVAL without (control).
    let clone3 = "import ctypes; l = ctypes.CDLL(None, use_errno=True); \
                  l.syscall(435, None, 0); print(ctypes.get_errno())";
    let o = command(As::Nobody, &bin)
        .args(["python3", "-c", clone3])
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "38\n", "{o:?}");
    let o = command(As::Nobody, "python3")
        .args(["-c", clone3])
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "22\n", "control: {o:?}");
    let script = "echo pid $$; cat /proc/self/cgroup";
    for who in BOTH {
        let run = |under: bool| {
            let mut c = if under {
                let mut c = command(who, &bin);
                c.arg(SANDBOX);
                c
            } else {
                sandbox(who)
            };
            let o = c
                .args(["run", "-v", "--allow-root", "--profile", "shell", "--"])
                .args(["bash", "-c", script])
                .current_dir(work.path())
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{who:?} under={under}: {o:?}");
            (text(&o.stdout), text(&o.stderr))
        };
        let (plain_out, _) = run(false);
        let (out, err) = run(true);
        assert!(err.contains("tier: isolated"), "{who:?}: {err}");
        // PID 1 is the namespaces' init, cloned by `clone`; the program is its child.
        assert!(out.starts_with("pid 2\n"), "{who:?}: {out}");
        // The child joined the request's cgroups itself: where the clone3 run is in one of
        // the sandbox's, so is this one.
        let own = |t: &str| t.lines().filter(|l| l.contains("sandbox-")).count();
        assert_eq!(own(&out), own(&plain_out), "{who:?}: {out} vs {plain_out}");
    }
}

/// Prints the errno `seccomp(SECCOMP_SET_MODE_FILTER, flags, NULL)` gets for flags 0, LOG,
/// SPEC_ALLOW and NEW_LISTENER (EFAULT, 14: the flags were accepted), then the Landlock ABI
/// (or minus the errno of the probe).
const GVISOR_PROBE: &str = "import ctypes\n\
l = ctypes.CDLL(None, use_errno=True)\n\
for f in (0, 2, 4, 8):\n    l.syscall(317, 1, f, None); print(ctypes.get_errno())\n\
r = l.syscall(444, None, 0, 1); print(r if r >= 0 else -ctypes.get_errno())\n";

#[test]
fn in_a_gvisor_like_container_runs_fall_back_say_what_is_missing_and_check_agrees() {
    let Some(b) = runnable() else { return };
    // The container answers as gVisor does; the same probe outside it gets the kernel's
    // answers (the control).
    let o = b.run(Shape::GVisor, 1000, &["python3", "-c", GVISOR_PROBE], None);
    assert_eq!(text(&o.stdout), "14\n22\n22\n22\n-38\n", "{o:?}");
    let o = Command::new("python3")
        .args(["-c", GVISOR_PROBE])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(out.starts_with("14\n14\n14\n14\n"), "control: {o:?}");
    assert!(!out.ends_with("-38\n"), "control: {o:?}");
    let listener = "seccomp user notification unavailable";
    let fork = "/bin/true && echo forked";
    for uid in [0, 1000] {
        let who = format!("uid {uid}");
        // A default run works, in the filtered tier, and names each missing layer once.
        let o = b.run(
            Shape::GVisor,
            uid,
            &["/t/sandbox", "run", "-v", "--", "/bin/true"],
            None,
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        assert!(err.contains("tier: filtered"), "{who}: {err}");
        for what in [
            listener,
            "Landlock protections missing",
            "namespaces unavailable",
        ] {
            let n = err.lines().filter(|l| l.contains(what)).count();
            assert_eq!(n, 1, "{who}: {what}: {err}");
        }
        assert!(err.contains("ran in the filtered tier"), "{who}: {err}");
        // What Landlock gave is named as missing: credentials and writes outside the workspace.
        assert!(err.contains("file read restriction"), "{who}: {err}");
        assert!(err.contains("file write restriction"), "{who}: {err}");

        // A call the profile refuses is still refused, by the filter's own errno...
        let o = b.run(
            Shape::GVisor,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--allow-root",
                "--",
                "bash",
                "-c",
                fork,
            ],
            None,
        );
        assert!(!text(&o.stdout).contains("forked"), "{who}: {o:?}");
        assert!(
            text(&o.stderr).contains("fork: Operation not permitted"),
            "{who}: {o:?}"
        );
        // ...which the same command makes without the sandbox (the control).
        let o = b.run(Shape::GVisor, uid, &["bash", "-c", fork], None);
        assert_eq!(text(&o.stdout), "forked\n", "{who}: control: {o:?}");
        // Under `kill` the filter ends the program, and the run says the call is unnamed.
        let o = b.run(
            Shape::GVisor,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--allow-root",
                "--on-violation",
                "kill",
                "--",
                "bash",
                "-c",
                fork,
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(128 + libc::SIGSYS), "{who}: {o:?}");
        assert!(
            text(&o.stderr).contains("cannot be named here"),
            "{who}: {o:?}"
        );

        // Each layer asked for as required is refused, naming why.
        for (flag, why) in [
            ("--landlock", "the kernel has no Landlock"),
            ("--isolation", "seccomp profile"),
        ] {
            let o = b.run(
                Shape::GVisor,
                uid,
                &["/t/sandbox", "run", flag, "required", "--", "/bin/true"],
                None,
            );
            assert_eq!(o.status.code(), Some(125), "{who}: {flag}: {o:?}");
            assert!(text(&o.stderr).contains(why), "{who}: {flag}: {o:?}");
        }
        // Learning is the listener: refused, with the reason.
        let o = b.run(
            Shape::GVisor,
            uid,
            &["/t/sandbox", "learn", "--", "/bin/true"],
            None,
        );
        assert_eq!(o.status.code(), Some(125), "{who}: {o:?}");
        assert!(text(&o.stderr).contains(listener), "{who}: {o:?}");

        // check predicts the run: the same tier, layers and warnings as an exec of the same
        // default job.
        let o = b.run(Shape::GVisor, uid, &["/t/sandbox", "check", "--json"], None);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["ok"], true, "{who}: {report}");
        assert_eq!(report["tier"], "filtered", "{who}: {report}");
        let line = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "seccomp listener")
            .cloned()
            .unwrap_or_default();
        assert_eq!(line["status"], "warn", "{who}: {report}");
        let o = b.run(
            Shape::GVisor,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(br#"{"argv": ["/bin/true"], "allow_root": true}"#),
        );
        let result: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(result["exit_code"], 0, "{who}: {result}");
        let run = &report["run"];
        for k in ["tier", "sandboxed", "landlock", "network"] {
            assert_eq!(result[k], run[k], "{who}: {k}: {result} vs {run}");
        }
        assert_eq!(
            result["isolation"]["unavailable"], run["isolation"]["unavailable"],
            "{who}: {result} vs {run}"
        );
        for w in [&result["warnings"], &run["warnings"]] {
            assert!(w.to_string().contains(listener), "{who}: {w}");
        }
    }
}

#[test]
fn with_landlock_capped_as_on_older_guests_runs_name_what_is_missing_and_check_agrees() {
    let Some(b) = runnable() else { return };
    // A signal to a process outside the run (the sandbox itself, the shell's parent): Landlock
    // signal scoping (ABI 6) refuses it; with the ABI capped below 6 nothing else does here
    // (no PID namespace in a Docker-shaped container), so the run must name it.
    let signal = "kill -0 $PPID && echo signalled";
    for uid in [0, 1000] {
        for (cap, missing, kept) in [
            (
                "1",
                &["truncate restriction", "signal scoping"][..],
                &["file read", "file write", "TCP restriction"][..],
            ),
            (
                "2",
                &["truncate restriction", "signal scoping"][..],
                &["file read", "file write", "TCP restriction"][..],
            ),
            (
                "4",
                &["signal scoping", "abstract unix socket scoping"][..],
                &["TCP restriction", "truncate restriction"][..],
            ),
        ] {
            let who = format!("uid {uid}, ABI {cap}");
            let env = [format!("SANDBOX_LANDLOCK_MAX_ABI={cap}")];
            let env: Vec<&str> = env.iter().map(String::as_str).collect();
            let run = |args: &[&str], stdin: Option<&[u8]>| {
                b.run_env(Shape::Docker, uid, args, stdin, &env)
            };
            let o = run(&["/t/sandbox", "run", "-v", "--", "/bin/true"], None);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
            assert!(err.contains("tier: contained"), "{who}: {err}");
            let warning: Vec<&str> = err
                .lines()
                .filter(|l| l.contains("Landlock protections missing"))
                .collect();
            assert_eq!(warning.len(), 1, "{who}: {err}");
            // What is missing, then what other layers give: `minimal` makes no TCP socket,
            // so there is no TCP to restrict.
            let (lacking, covered) = warning[0]
                .split_once(" (given here by other layers: ")
                .unwrap_or((warning[0], ""));
            for m in missing {
                assert!(lacking.contains(m), "{who}: {m}: {err}");
            }
            for k in kept {
                assert!(!lacking.contains(k), "{who}: {k}: {err}");
            }
            if cap != "4" {
                assert!(
                    covered.contains("(TCP restriction) by the profile's filter"),
                    "{who}: {err}"
                );
            }
            // The file rules hold at every cap: the credential stays unreadable.
            let o = run(
                &[
                    "/t/sandbox",
                    "run",
                    "--profile",
                    "shell",
                    "--",
                    "cat",
                    "/home/u/.ssh/id_ed25519",
                ],
                None,
            );
            assert!(!text(&o.stdout).contains(SECRET), "{who}: {o:?}");
            // The missing scope is really missing: the signal gets out.
            let o = run(
                &[
                    "/t/sandbox",
                    "run",
                    "--allow-root",
                    "--profile",
                    "shell",
                    "--",
                    "bash",
                    "-c",
                    signal,
                ],
                None,
            );
            assert_eq!(text(&o.stdout), "signalled\n", "{who}: {o:?}");
            // --landlock required refuses, naming what the cap lacks.
            let o = run(
                &[
                    "/t/sandbox",
                    "run",
                    "--landlock",
                    "required",
                    "--",
                    "/bin/true",
                ],
                None,
            );
            assert_eq!(o.status.code(), Some(125), "{who}: {o:?}");
            assert!(text(&o.stderr).contains(missing[0]), "{who}: {o:?}");
            // check says the same as an exec of the same job.
            let o = run(&["/t/sandbox", "check", "--json"], None);
            assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
            let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(report["tier"], "contained", "{who}: {report}");
            let o = run(
                &["/t/sandbox", "exec", "--json"],
                Some(br#"{"argv": ["/bin/true"], "allow_root": true}"#),
            );
            let result: serde_json::Value =
                serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
            for k in ["tier", "sandboxed", "landlock"] {
                assert_eq!(
                    result[k], report["run"][k],
                    "{who}: {k}: {result} vs {report}"
                );
            }
            assert_eq!(
                result["landlock"]["abi"]["used"],
                cap.parse::<u64>().unwrap(),
                "{who}: {result}"
            );
        }
        // The control: at the kernel's own ABI the signal is refused.
        let o = b.run(
            Shape::Docker,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--",
                "bash",
                "-c",
                signal,
            ],
            None,
        );
        assert!(!text(&o.stdout).contains("signalled"), "uid {uid}: {o:?}");
    }
}

/// Writes `sandbox export --format oci ARGS` to the bundle's `exported.json`; returns the
/// export's stderr.
fn export_to(b: &Bundle, args: &[&str]) -> String {
    let o = Command::new(SANDBOX)
        .args(["export", "--format", "oci", "--out"])
        .arg(b.dir.path().join("exported.json"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {o:?}");
    text(&o.stderr)
}

/// The bundle's `exported.json` with `call` taken out of every entry (what the export wrote
/// before it added runc's calls).
fn without_call(b: &Bundle, call: &str) {
    let path = b.dir.path().join("exported.json");
    let mut f: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for rule in f["syscalls"].as_array_mut().unwrap() {
        rule["names"].as_array_mut().unwrap().retain(|n| n != call);
    }
    f["syscalls"]
        .as_array_mut()
        .unwrap()
        .retain(|r| !r["names"].as_array().unwrap().is_empty());
    std::fs::write(&path, f.to_string()).unwrap();
}

#[test]
fn exported_profiles_start_a_container_under_dockers_defaults() {
    let Some(b) = runnable() else { return };
    for args in [
        &["--profile", "shell"][..],
        &["--profile", "shell-network"],
        &["--profile", "write", "--allow", "execve"],
    ] {
        let notes = export_to(&b, args);
        assert!(
            notes.contains("added to the allow list: capset"),
            "{args:?}: {notes}"
        );
        for uid in [0, 1000] {
            let o = b.run(Shape::Exported, uid, &["sh", "-c", "echo ok"], None);
            assert_eq!(text(&o.stdout), "ok\n", "{args:?} as uid {uid}: {o:?}");
        }
    }
    // The control: without the calls runc makes after installing the filter (capset first),
    // the container dies before its program starts.
    export_to(&b, &["--profile", "shell"]);
    without_call(&b, "capset");
    for uid in [0, 1000] {
        let o = b.run(Shape::Exported, uid, &["sh", "-c", "echo ok"], None);
        assert!(!o.status.success(), "uid {uid}: {o:?}");
        assert_eq!(text(&o.stdout), "", "uid {uid}: {o:?}");
    }
}

#[test]
fn a_for_sandbox_export_lets_sandbox_run_and_check_inside_the_container() {
    let Some(b) = runnable() else { return };
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    let cat = ["/t/sandbox", "run", "--", "cat", "/etc/hostname"];
    // The control: under the plain export the container starts, but sandbox inside it dies
    // at its first namespace clone (the profile's default action).
    export_to(&b, &["--profile", "shell"]);
    for uid in [0, 1000] {
        let o = b.run(Shape::Exported, uid, &cat, None);
        assert_ne!(o.status.code(), Some(0), "uid {uid}: {o:?}");
        assert_ne!(text(&o.stdout), hostname, "uid {uid}: {o:?}");
    }
    let notes = export_to(&b, &["--profile", "shell", "--for-sandbox"]);
    assert!(notes.contains("landlock_restrict_self"), "{notes}");
    for uid in [0, 1000] {
        let who = format!("uid {uid}");
        let o = b.run(Shape::Exported, uid, &cat, None);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        assert_eq!(text(&o.stdout), hostname, "{who}: {o:?}");
        assert!(
            text(&o.stderr).contains("ran in the contained tier"),
            "{who}: {o:?}"
        );
        let o = b.run(
            Shape::Exported,
            uid,
            &["/t/sandbox", "check", "--json"],
            None,
        );
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["tier"], "contained", "{who}: {report}");
        // Landlock works inside: the credential stays unreadable under sandbox...
        let read = ["cat", "/home/u/.ssh/id_ed25519"];
        let o = b.run(
            Shape::Exported,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--profile",
                "shell",
                "--",
                read[0],
                read[1],
            ],
            None,
        );
        assert!(!text(&o.stdout).contains(SECRET), "{who}: {o:?}");
        // ...and readable without it (the control).
        let o = b.run(Shape::Exported, uid, &read, None);
        assert_eq!(text(&o.stdout), SECRET, "{who}: control: {o:?}");
    }
}

#[test]
fn in_an_image_of_static_programs_the_default_confines_them() {
    let Some(b) = runnable() else { return };
    // Where /bin/sh is dynamic (this host), the default still refuses busybox, and says
    // `confine` first.
    let o = Command::new(SANDBOX)
        .args(["run", "--", "/bin/busybox", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let err = text(&o.stderr);
    let confine = err.find("--static-binary confine");
    assert!(
        confine.is_some_and(|c| err.find("warn").is_some_and(|w| c < w)),
        "{err}"
    );
    // Root reads the password hashes and the home's key; uid 1000 the key (the hashes are
    // root's).
    let attack = "cat /etc/shadow /home/u/.ssh/id_ed25519; echo x > /srv/x";
    for uid in [0, 1000] {
        let who = format!("uid {uid}");
        let x = b.dir.path().join("srv/x");
        let _ = std::fs::remove_file(&x);
        // The control: busybox reads the secrets and writes outside the workspace.
        let o = b.run(Shape::Static, uid, &["sh", "-c", attack], None);
        assert!(text(&o.stdout).contains(SECRET), "{who}: control: {o:?}");
        assert_eq!(
            text(&o.stdout).contains(HASH),
            uid == 0,
            "{who}: control: {o:?}"
        );
        assert!(x.exists(), "{who}: control: {o:?}");
        std::fs::remove_file(&x).unwrap();
        // Under the default, busybox runs, confined: neither happens.
        let o = b.run(
            Shape::Static,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--profile",
                "shell",
                "--",
                "sh",
                "-c",
                attack,
            ],
            None,
        );
        assert!(!text(&o.stdout).contains(SECRET), "{who}: {o:?}");
        assert!(!text(&o.stdout).contains(HASH), "{who}: {o:?}");
        assert!(!x.exists(), "{who}: {o:?}");
        let err = text(&o.stderr);
        assert!(!err.contains("statically linked"), "{who}: {err}");
        assert!(
            err.contains("id_ed25519"),
            "{who}: the refusal is named: {err}"
        );
        // Allowed things work, silently but for the contained tier's line.
        let o = b.run(
            Shape::Static,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--",
                "sh",
                "-c",
                "echo ok > /ws/ok; cat /ws/ok",
            ],
            None,
        );
        assert_eq!(text(&o.stdout), "ok\n", "{who}: {o:?}");
        // check agrees: a default run works here.
        let o = b.run(Shape::Static, uid, &["/t/sandbox", "check", "--json"], None);
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(report["ok"], true, "{who}: {report}");
        assert_eq!(report["tier"], "contained", "{who}: {report}");
    }
}

/// A session started from a shell inside a container of `shape`, as root and as uid 1000:
/// a background server started by one command answers the next, stdin reaches a command,
/// and `session end` leaves nothing running.
fn a_session_works_inside(shape: Shape) {
    let Some(b) = runnable() else { return };
    std::fs::write(
        b.dir.path().join("ws/marker.txt"),
        "served-from-the-workspace\n",
    )
    .unwrap();
    let script = r#"
        id=$(/t/sandbox session start --profile shell-network --workspace /ws "$@") || exit 9
        # The server's name is put together, so that no command line here matches the
        # pattern `pgrep` looks for (its own shell's would otherwise).
        /t/sandbox run --session "$id" -- sh -c \
            'm=http; python3 -m $m.server 8000 --bind 127.0.0.1 >/ws/server-$(id -u).log 2>&1 &'
        for i in $(seq 50); do
            /t/sandbox run --session "$id" -- curl -sf http://127.0.0.1:8000/marker.txt && break
            sleep 0.2
        done
        echo hi | /t/sandbox run --session "$id" -- cat
        # A file of the user's outside the workspace keeps its mode (the supervisor refuses
        # the session command's chmod, as a one-shot's).
        f=/home/u/rc-$(id -u); echo x > $f; chmod 600 $f
        /t/sandbox run --session "$id" -- chmod 666 $f 2>/dev/null; stat -c %a $f
        /t/sandbox run --session "$id" -- pgrep -f 'http[.]server' >/dev/null && echo server-alive
        /t/sandbox session end "$id" && echo ended
        pgrep -f 'http[.]server' >/dev/null || echo server-gone
    "#;
    for uid in [0, 1000] {
        let who = format!("{shape:?} as uid {uid}");
        let mut args = vec!["/bin/bash", "-c", script, "script"];
        if uid == 0 {
            // Root without namespaces is refused unless the command line says so, in its
            // own words.
            let o = b.run(shape, uid, &args, None);
            assert_eq!(o.status.code(), Some(9), "{who}: {o:?}");
            let err = text(&o.stderr);
            assert!(
                err.starts_with("sandbox: session start: --allow-root: running as root")
                    && err.contains("pass --allow-root to run anyway")
                    && !err.contains("\"allow_root\""),
                "{who}: {err}"
            );
            args.push("--allow-root");
        }
        let o = b.run(shape, uid, &args, None);
        let out = text(&o.stdout);
        assert_eq!(
            out, "served-from-the-workspace\nhi\n600\nserver-alive\nended\nserver-gone\n",
            "{who}: {o:?}"
        );
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
    }
}

#[test]
fn a_session_works_inside_a_docker_shaped_container() {
    a_session_works_inside(Shape::Docker);
}

#[test]
fn a_session_works_inside_a_kubernetes_pod() {
    a_session_works_inside(Shape::Kubernetes);
}
