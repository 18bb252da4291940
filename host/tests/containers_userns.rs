//! `sandbox` inside containers that have a user namespace of their own, run by runc on the real
//! kernel: Kubernetes pods with `hostUsers: false`, Docker with `userns-remap`, rootless Docker
//! and Podman. The container's root is host uid [`BASE`] (its ids 0-65535 are host ids
//! `BASE`-`BASE+65535`), so nothing in it is privileged on the host; everything else is as in
//! `containers.rs` (Docker's capabilities, the host's `/usr` and `/etc` bound read-only, a home
//! with a credential, a workspace). Three settings ([`Setting`]):
//!
//! - **docker**: Docker's default seccomp profile (without `CAP_SYS_ADMIN` it refuses `unshare`
//!   and `clone` with namespace flags, and answers `clone3` with ENOSYS), runc's masked `/proc`;
//! - **pod**: `Unconfined` seccomp and runc's masked `/proc` (a `hostUsers: false` pod's
//!   default);
//! - **unmasked**: `Unconfined` and `procMount: Unmasked` (no masked or read-only `/proc` paths);
//! - **docker, `CAP_SYS_ADMIN`**: Docker's profile for a container given `CAP_SYS_ADMIN` (it
//!   then allows `unshare`, `mount` and `clone` with namespace flags) and an unmasked `/proc`.
//!
//! For each, as the container's root and as uid 1000 in it: the container is shaped as claimed
//! (its own uid map; a fresh `/proc` in a nested user namespace works only where unmasked), a
//! run gets the tier the setting gives (`exec --json`'s `tier`), `check --json` predicts that
//! same tier and reason (and, in its `process limit` line, whether an explicit
//! `limits.processes` is enforced), `--isolation required` succeeds or refuses accordingly, and the escape
//! essentials: a credential in the container's HOME, a write and a `chmod` outside the
//! workspace, a connection to a unix socket of the container, a signal to a process outside the
//! job. Every one of them is done once without the sandbox, where it works (the control). The
//! contained tier's documented gaps (docs/security.md: metadata changes, pathname sockets under
//! profiles that allow `AF_UNIX`) are asserted as gaps, so that the table stays true.
//!
//! Besides: a container with a cgroup namespace whose memory cgroup is delegated to its root
//! gets each job a memory cgroup of its own with the request's limit, and `check` says where
//! (and, where the cgroup may not be written, what bounds the job instead).
//!
//! Needs root and runc (.ci/packages); skipped, saying so, without runc.

mod common;

use common::moby::docker_seccomp;
use common::SANDBOX;
use sandbox_policy::oci::DOCKER_DEFAULT_CAPS as DOCKER_CAPS;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The host uid (and gid) of the container's root.
const BASE: u32 = 200_000;

/// How many ids the container's user namespace maps.
const SIZE: u32 = 65_536;

/// What the credential file holds.
const SECRET: &str = "PRIVATE-KEY-MATERIAL";

/// The container settings under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    /// Docker's default seccomp profile (no `CAP_SYS_ADMIN`), masked `/proc`.
    Docker,
    /// `Unconfined` seccomp, masked `/proc`: a `hostUsers: false` pod's default.
    Pod,
    /// `Unconfined` seccomp, `procMount: Unmasked`.
    Unmasked,
    /// Docker's default profile for a container given `CAP_SYS_ADMIN` (`--cap-add SYS_ADMIN`:
    /// the profile then allows the namespace calls), and `systempaths=unconfined`.
    DockerSysAdmin,
}

impl Setting {
    /// The tier a default run gets there, and what its reason for missing namespaces names.
    fn expected(self) -> (&'static str, Option<&'static str>) {
        match self {
            Setting::Docker => ("contained", Some("seccomp profile")),
            Setting::Pod => ("contained", Some("a fresh /proc is refused")),
            Setting::Unmasked | Setting::DockerSysAdmin => ("isolated", None),
        }
    }

    /// The container's capabilities: Docker's, and `CAP_SYS_ADMIN` where added.
    fn caps(self) -> Vec<&'static str> {
        let mut caps = DOCKER_CAPS.to_vec();
        if self == Setting::DockerSysAdmin {
            caps.push("CAP_SYS_ADMIN");
        }
        caps
    }
}

/// The attacks, run by the container's shell as `sh /attack.sh UID WRAP...`: WRAP is the
/// sandbox command line (none for the control). A unix socket listener and a `sleep` are
/// started first, outside the job; each attack prints a marker only when it worked.
const ATTACK_SH: &str = r#"u=$1; shift
rm -f /srv/x-$u /srv/s-$u.sock; echo keep > /srv/f-$u; chmod 600 /srv/f-$u
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); time.sleep(60)' /srv/s-$u.sock &
l=$!
sleep 60 &
p=$!
while [ ! -S /srv/s-$u.sock ]; do sleep 0.02; done
"$@" cat /home/u/.ssh/id_ed25519; echo
"$@" sh -c "echo x > /srv/x-$u"; [ -e /srv/x-$u ] && echo WROTE
"$@" chmod 666 /srv/f-$u; [ "$(stat -c %a /srv/f-$u)" = 666 ] && echo CHMODDED
"$@" sh -c "kill -0 $p && echo SIGNALLED"
"$@" python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("CONNECTED")' /srv/s-$u.sock
kill $l $p
"#;

/// A bundle: a root whose mount points the container's root may search, homes and a
/// workspace owned by the container's ids, runc's default config kept aside.
struct Bundle {
    dir: tempfile::TempDir,
}

impl Bundle {
    fn new() -> Bundle {
        let dir = tempfile::tempdir().unwrap();
        // The container's root is not host root: every directory on the way must be searchable.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().join("rootfs");
        for d in [
            "usr", "etc", "proc", "dev", "sys", "tmp", "home/u", "ws", "t", "srv", "run",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for l in ["bin", "sbin", "lib", "lib64", "lib32", "libx32"] {
            if Path::new("/").join(l).exists() {
                std::os::unix::fs::symlink(format!("usr/{l}"), root.join(l)).unwrap();
            }
        }
        std::fs::write(root.join("attack.sh"), ATTACK_SH).unwrap();
        let own = |p: &Path, uid: u32, mode: u32| {
            std::os::unix::fs::chown(p, Some(BASE + uid), Some(BASE + uid)).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        for (name, uid) in [("root-home", 0), ("home", 1000)] {
            let home = dir.path().join(name);
            std::fs::create_dir_all(home.join(".ssh")).unwrap();
            std::fs::write(home.join(".ssh/id_ed25519"), SECRET).unwrap();
            own(&home, uid, 0o755);
            own(&home.join(".ssh"), uid, 0o700);
            own(&home.join(".ssh/id_ed25519"), uid, 0o600);
        }
        // One workspace for both users: root in a nested user namespace has no power over
        // files of ids its namespace does not map.
        for (name, mode) in [("ws", 0o777), ("tmp", 0o1777), ("srv", 0o777)] {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            own(&d, 0, mode);
        }
        // The file a runtime binds over /etc/hosts, the container's to write.
        std::fs::write(dir.path().join("hosts"), "127.0.0.1 localhost\n").unwrap();
        own(&dir.path().join("hosts"), 0, 0o644);
        let o = Command::new("runc")
            .args(["spec", "--bundle"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "runc spec: {o:?}");
        std::fs::rename(
            dir.path().join("config.json"),
            dir.path().join("default.json"),
        )
        .unwrap();
        Bundle { dir }
    }

    /// Runs `args` in a container of `setting` as `uid` (root with Docker's capabilities, any
    /// other user with none), in the workspace `/ws`, HOME `/home/u`, stdin `stdin` or
    /// /dev/null.
    fn run(&self, setting: Setting, uid: u32, args: &[&str], stdin: Option<&[u8]>) -> Output {
        self.run_in(setting, uid, args, stdin, None)
    }

    /// As [`Bundle::run`]; with `cgroup` (a path in the v1 hierarchies), the container is
    /// placed in that cgroup, in a cgroup namespace of its own, with the cgroup file systems
    /// mounted writable at `/sys/fs/cgroup` (as Docker and containerd do with
    /// `cgroupns=private`; whether the container's root may write its cgroup is the
    /// directory's owner, set by the caller).
    fn run_in(
        &self,
        setting: Setting,
        uid: u32,
        args: &[&str],
        stdin: Option<&[u8]>,
        cgroup: Option<&str>,
    ) -> Output {
        let default = self.dir.path().join("default.json");
        let mut c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(default).unwrap()).unwrap();
        let caps = serde_json::json!(setting.caps());
        c["process"]["terminal"] = false.into();
        c["process"]["args"] = serde_json::json!(args);
        c["process"]["user"] = serde_json::json!({"uid": uid, "gid": uid});
        c["process"]["cwd"] = "/ws".into();
        c["process"]["env"] = serde_json::json!([
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "HOME=/home/u",
            "LANG=C.UTF-8"
        ]);
        c["process"]["noNewPrivileges"] = false.into();
        c["process"]["capabilities"] = if uid == 0 {
            serde_json::json!({"bounding": caps, "effective": caps, "permitted": caps})
        } else {
            serde_json::json!({"bounding": caps})
        };
        c["root"] = serde_json::json!({"path": self.dir.path().join("rootfs"), "readonly": true});
        // runc's default mounts, but the cgroup hierarchy (this host's v1 hierarchies cannot be
        // mounted into a root this minimal; the sandbox then finds none to use).
        let mut mounts: Vec<serde_json::Value> = c["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["destination"] != "/sys/fs/cgroup")
            .cloned()
            .collect();
        let home = if uid == 0 { "root-home" } else { "home" };
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
            // Volumes as Kubernetes and Docker mount them: never set-id programs or devices.
            mounts.push(serde_json::json!({
                "destination": dst, "type": "bind", "source": src,
                "options": ["rbind", mode, "nosuid", "nodev"]
            }));
        }
        // A single file bound over one of a read-only directory (as runtimes bind /etc/hosts)
        // and a noexec tmpfs: more flags the job's mount namespace gets locked.
        mounts.push(serde_json::json!({
            "destination": "/etc/hosts", "type": "bind", "source": self.dir.path().join("hosts"),
            "options": ["rbind", "rw", "nosuid", "nodev"]
        }));
        mounts.push(serde_json::json!({
            "destination": "/run", "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "nodev", "noexec", "mode=755"]
        }));
        if cgroup.is_some() {
            mounts.push(serde_json::json!({
                "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
                "options": ["nosuid", "noexec", "nodev", "relatime", "rw"]
            }));
        }
        c["mounts"] = mounts.into();
        let linux = &mut c["linux"];
        linux["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        if let Some(path) = cgroup {
            linux["namespaces"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"type": "cgroup"}));
            linux["cgroupsPath"] = path.into();
        }
        let map = serde_json::json!([{"containerID": 0, "hostID": BASE, "size": SIZE}]);
        linux["uidMappings"] = map.clone();
        linux["gidMappings"] = map;
        assert!(
            linux["maskedPaths"]
                .as_array()
                .is_some_and(|m| m.iter().any(|p| p == "/proc/kcore")),
            "runc's default config masks /proc"
        );
        match setting {
            Setting::Docker => linux["seccomp"] = docker_seccomp(&setting.caps()),
            Setting::Pod => {
                linux.as_object_mut().unwrap().remove("seccomp");
            }
            Setting::Unmasked => {
                // What containerd and CRI-O do for `procMount: Unmasked`: neither list.
                linux.as_object_mut().unwrap().remove("seccomp");
                linux["maskedPaths"] = serde_json::json!([]);
                linux["readonlyPaths"] = serde_json::json!([]);
            }
            Setting::DockerSysAdmin => {
                // dockerd computes the profile from the container's capabilities.
                linux["seccomp"] = docker_seccomp(&setting.caps());
                linux["maskedPaths"] = serde_json::json!([]);
                linux["readonlyPaths"] = serde_json::json!([]);
            }
        }
        std::fs::write(self.dir.path().join("config.json"), c.to_string()).unwrap();
        common::runc::run(self.dir.path(), "sandbox-userns", stdin)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A bundle, or `None` (said on stderr) when runc is not installed.
fn runnable() -> Option<Bundle> {
    common::runc::available().then(Bundle::new)
}

/// What the attack script printed and left behind for `uid`.
#[derive(Debug)]
struct Effects {
    read: bool,
    wrote: bool,
    chmodded: bool,
    signalled: bool,
    connected: bool,
}

fn attack(b: &Bundle, setting: Setting, uid: u32, wrap: &[&str]) -> (Effects, Output) {
    let u = uid.to_string();
    let mut args = vec!["sh", "/attack.sh", &u];
    args.extend_from_slice(wrap);
    let o = b.run(setting, uid, &args, None);
    let out = text(&o.stdout);
    let e = Effects {
        read: out.contains(SECRET),
        wrote: out.contains("WROTE") || b.dir.path().join(format!("srv/x-{uid}")).exists(),
        chmodded: out.contains("CHMODDED"),
        signalled: out.contains("SIGNALLED"),
        connected: out.contains("CONNECTED"),
    };
    (e, o)
}

/// Everything the task asks of one setting, as the container's root and as uid 1000.
fn setting_holds(setting: Setting) {
    let Some(b) = runnable() else { return };
    let (tier, why) = setting.expected();

    // The container is shaped as claimed: a user namespace of its own...
    let o = b.run(setting, 1000, &["cat", "/proc/self/uid_map"], None);
    let map: Vec<String> = text(&o.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(
        map,
        ["0", &BASE.to_string(), &SIZE.to_string()],
        "{setting:?}: {o:?}"
    );
    // ...a seccomp filter exactly where the setting has one...
    let o = b.run(
        setting,
        1000,
        &["grep", "^Seccomp:", "/proc/self/status"],
        None,
    );
    let filtered = matches!(setting, Setting::Docker | Setting::DockerSysAdmin);
    assert_eq!(
        text(&o.stdout).split_whitespace().nth(1),
        Some(if filtered { "2" } else { "0" }),
        "{setting:?}: {o:?}"
    );
    // ...in which a fresh /proc in nested user, PID and mount namespaces (util-linux's
    // unshare) works only when unmasked; the Docker profile refuses the namespaces themselves.
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
    let o = b.run(setting, 1000, &fresh_proc, None);
    assert_eq!(
        o.status.success(),
        setting.expected().0 == "isolated",
        "{setting:?}: {o:?}"
    );
    let o = b.run(setting, 1000, &["unshare", "--user", "true"], None);
    let userns = o.status.success();
    assert_eq!(userns, setting != Setting::Docker, "{setting:?}: {o:?}");

    for uid in [0, 1000] {
        let who = format!("{setting:?} as uid {uid}");

        // The tier a run gets: a job through `exec --json` (root is refused below the isolated
        // tier without `allow_root`, so every request carries it).
        let o = b.run(
            setting,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(br#"{"argv": ["/bin/true"], "allow_root": true}"#),
        );
        let result: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(result["exit_code"], 0, "{who}: {result}");
        assert_eq!(result["tier"], tier, "{who}: {result}");
        let unavailable = &result["isolation"]["unavailable"];
        match why {
            Some(why) => assert!(
                unavailable.as_str().is_some_and(|u| u.contains(why)),
                "{who}: {result}"
            ),
            None => assert!(unavailable.is_null(), "{who}: {result}"),
        }

        // check predicts exactly that: the same tier, layers and reason.
        let o = b.run(setting, uid, &["/t/sandbox", "check", "--json"], None);
        assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
        let report: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_eq!(report["ok"], true, "{who}: {report}");
        assert_eq!(
            report["tier"], result["tier"],
            "{who}: {report} vs {result}"
        );
        let run = &report["run"];
        for k in ["tier", "sandboxed", "landlock"] {
            assert_eq!(run[k], result[k], "{who}: {k}: {run} vs {result}");
        }
        assert_eq!(
            run["isolation"]["unavailable"], *unavailable,
            "{who}: {run} vs {result}"
        );

        // check's `user namespaces` line says whether one can be created, as unshare found.
        let named = |name: &str| {
            report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{who}: {name}: {report}"))
        };
        let userns_line = named("user namespaces");
        assert_eq!(
            userns_line["status"] == "ok",
            userns,
            "{who}: {userns_line}"
        );

        // check's `process limit` line predicts whether an explicit limit is enforced: there is
        // no pids controller in these containers, so only the job's own user namespace
        // (RLIMIT_NPROC counted in it, for a user other than root) can give one.
        let line = named("process limit");
        let o = b.run(
            setting,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(br#"{"argv": ["/bin/true"], "allow_root": true, "limits": {"processes": 64}}"#),
        );
        let limited: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        let enforced = limited["exit_code"] == 0;
        if !enforced {
            assert_eq!(
                limited["error"]["field"], "limits.processes",
                "{who}: {limited}"
            );
        }
        assert_eq!(
            line["status"] == "ok",
            enforced,
            "{who}: {line} vs {limited}"
        );
        assert_eq!(enforced, uid != 0 && tier == "isolated", "{who}: {limited}");

        // --isolation required: runs where the tier is isolated, refuses (naming why) where not.
        let o = b.run(
            setting,
            uid,
            &[
                "/t/sandbox",
                "run",
                "--isolation",
                "required",
                "--allow-root",
                "--",
                "/bin/true",
            ],
            None,
        );
        match why {
            Some(why) => {
                assert_eq!(o.status.code(), Some(125), "{who}: {o:?}");
                assert!(text(&o.stderr).contains(why), "{who}: {o:?}");
            }
            None => {
                assert_eq!(o.status.code(), Some(0), "{who}: {o:?}");
                assert_eq!(text(&o.stderr), "", "{who}: {o:?}");
            }
        }

        // The controls: every attack works in this container without the sandbox.
        let (e, o) = attack(&b, setting, uid, &[]);
        assert!(
            e.read && e.wrote && e.chmodded && e.signalled && e.connected,
            "{who}: control: {e:?}: {o:?}"
        );
        // Under a profile that allows unix sockets and chmod (shell-network): the credential,
        // the write, the signal, the chmod and the connection are refused in both tiers (the
        // isolated tier's view; the contained tier's supervisor, docs/isolation.md).
        let sandboxed = [
            "/t/sandbox",
            "run",
            "--allow-root",
            "--profile",
            "shell-network",
            "--",
        ];
        let (e, o) = attack(&b, setting, uid, &sandboxed);
        assert!(
            !e.read && !e.wrote && !e.signalled && !e.chmodded,
            "{who}: {e:?}: {o:?}"
        );
        let err = text(&o.stderr);
        // Where the supervisor may not take the job's socket (Docker's profile refuses
        // `pidfd_getfd` without CAP_SYS_PTRACE) the connection goes through, and only there,
        // and the run says so.
        assert_eq!(
            e.connected,
            err.contains("host unix sockets are unguarded in this run"),
            "{who}: {e:?}: {err}"
        );
        assert!(
            err.contains("id_ed25519"),
            "{who}: the read is named: {err}"
        );
        assert!(
            err.contains(&format!("/srv/x-{uid}")),
            "{who}: the write is named: {err}"
        );
        // The chmod is named by the sandbox (the program's own `chmod: changing permissions`
        // line is not the naming).
        let victim = format!("/srv/f-{uid}");
        assert!(
            err.lines()
                .any(|l| l.starts_with("sandbox: ") && l.contains(&victim)),
            "{who}: the chmod is named: {err}"
        );
        // And in `exec --json`'s result: in the contained tier a violation naming the field
        // that allows it (the supervisor's refusal); in the isolated tier a refusal (EROFS).
        let req = serde_json::json!({
            "argv": ["chmod", "666", victim],
            "profile": "shell",
            "allow_root": true,
        });
        let o = b.run(
            setting,
            uid,
            &["/t/sandbox", "exec", "--json"],
            Some(req.to_string().as_bytes()),
        );
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
        assert_ne!(r["exit_code"], 0, "{who}: {r}");
        if tier == "contained" {
            let entry = r["violations"]
                .as_array()
                .and_then(|a| a.iter().find(|e| e["syscall"] == "fchmodat"))
                .unwrap_or_else(|| panic!("{who}: {r}"));
            assert_eq!(
                entry["change"],
                format!("\"writable_paths\": [\"{victim}\"]"),
                "{who}: {r}"
            );
        } else {
            assert!(
                r["refusals"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|e| e["path"] == victim.as_str())),
                "{who}: {r}"
            );
        }
        // Under shell, the profile refuses the unix socket itself, in every tier.
        let shell = [
            "/t/sandbox",
            "run",
            "--allow-root",
            "--profile",
            "shell",
            "--",
        ];
        let (e, o) = attack(&b, setting, uid, &shell);
        assert!(
            !e.read && !e.wrote && !e.signalled && !e.connected,
            "{who}: {e:?}: {o:?}"
        );
    }
}

/// The v1 memory hierarchy of this host (the test machine's controllers are all in v1
/// hierarchies; its cgroup v2 has none).
const MEMORY_V1: &str = "/sys/fs/cgroup/memory";

/// A cgroup for one container in the v1 memory hierarchy, removed on drop (with what the
/// sandbox left in it, which it removes itself at exit).
struct Delegated {
    rel: String,
    owner: u32,
}

impl Delegated {
    /// The cgroup `/<name>` in the memory hierarchy, to be owned by host uid `owner`.
    fn new(name: &str, owner: u32) -> Delegated {
        Delegated {
            rel: format!("/{name}-{}", std::process::id()),
            owner,
        }
    }

    /// Creates the cgroup (`runc delete` removes it with each container) and gives its
    /// directory to the owner: what its owner may then do is create cgroups in it, which is
    /// what a delegation gives.
    fn prepare(&self) {
        let dir = Path::new(MEMORY_V1).join(&self.rel[1..]);
        if let Err(e) = std::fs::create_dir(&dir) {
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        }
        std::os::unix::fs::chown(&dir, Some(self.owner), Some(self.owner)).unwrap();
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        let dir = Path::new(MEMORY_V1).join(&self.rel[1..]);
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// A container with its own cgroup namespace whose memory cgroup its root owns (delegated, as
/// runtimes do without systemd): a job gets a memory cgroup of its own there, with the
/// request's limit, in both tiers, and `check` says where. Where the caller may not write the
/// cgroup (uid 1000 in it; root of a container whose cgroup was not handed over: the control),
/// `check` says there is no memory cgroup and what bounds the job instead.
#[test]
fn a_delegated_memory_cgroup_in_a_userns_container_holds_the_jobs_limit() {
    let Some(b) = runnable() else { return };
    if !Path::new(MEMORY_V1).join("memory.limit_in_bytes").exists() {
        eprintln!("skipped: no cgroup v1 memory hierarchy at {MEMORY_V1}");
        return;
    }
    let delegated = Delegated::new("sandbox-userns-delegated", BASE);
    let kept = Delegated::new("sandbox-userns-kept", 0);
    // The job reports its memory cgroup and that cgroup's limit.
    let probe = "c=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); echo cgroup=$c; \
                 echo limit=$(cat /sys/fs/cgroup/memory$c/memory.limit_in_bytes)";
    let req = serde_json::json!({
        "argv": ["/bin/sh", "-c", probe],
        "profile": "shell",
        "allow_root": true,
        "limits": {"memory_bytes": 64 << 20},
    });
    for setting in [Setting::Pod, Setting::Unmasked] {
        for (cg, uid, holds) in [
            (&delegated, 0, true),
            (&delegated, 1000, false),
            (&kept, 0, false),
        ] {
            let who = format!("{setting:?} as uid {uid} in {}", cg.rel);
            let run = |args: &[&str], stdin: Option<&[u8]>| {
                cg.prepare();
                b.run_in(setting, uid, args, stdin, Some(&cg.rel))
            };
            // The container is shaped as claimed: its cgroup is the root of its namespace.
            let o = run(&["grep", ":memory:", "/proc/self/cgroup"], None);
            assert_eq!(
                text(&o.stdout).trim_end().rsplit(':').next(),
                Some("/"),
                "{who}: {o:?}"
            );

            let o = run(&["/t/sandbox", "check", "--json"], None);
            let report: serde_json::Value =
                serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
            let line = report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "memory limit")
                .cloned()
                .unwrap_or_else(|| panic!("{who}: {report}"));
            let detail = line["detail"].as_str().unwrap_or_default();

            let o = run(
                &["/t/sandbox", "exec", "--json"],
                Some(req.to_string().as_bytes()),
            );
            let r: serde_json::Value =
                serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
            assert_eq!(r["exit_code"], 0, "{who}: {r}");
            let out = r["stdout"].as_str().unwrap();
            if holds {
                assert_eq!(line["status"], "ok", "{who}: {line}");
                assert!(
                    detail.contains("memory.limit_in_bytes of a v1 memory cgroup per request under /sys/fs/cgroup/memory"),
                    "{who}: {line}"
                );
                assert!(out.contains("cgroup=/sandbox-exec-"), "{who}: {r}");
                assert!(out.contains(&format!("limit={}", 64 << 20)), "{who}: {r}");
                // The kernel holds it: 128 MiB written ends the job, named; the control is
                // the same job under the default limit (512 MiB).
                let fill =
                    serde_json::json!(["python3", "-c", "b = b'x' * (128 << 20); print('filled')"]);
                let mut big = req.clone();
                big["argv"] = fill.clone();
                let o = run(
                    &["/t/sandbox", "exec", "--json"],
                    Some(big.to_string().as_bytes()),
                );
                let r: serde_json::Value = serde_json::from_slice(&o.stdout)
                    .unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
                assert_eq!(r["limits_hit"], serde_json::json!(["memory"]), "{who}: {r}");
                assert_eq!(r["stdout"], "", "{who}: {r}");
                let control =
                    serde_json::json!({"argv": fill, "profile": "shell", "allow_root": true});
                let o = run(
                    &["/t/sandbox", "exec", "--json"],
                    Some(control.to_string().as_bytes()),
                );
                let r: serde_json::Value = serde_json::from_slice(&o.stdout)
                    .unwrap_or_else(|e| panic!("{who}: {e}: {o:?}"));
                assert_eq!(r["stdout"], "filled\n", "{who}: control: {r}");
            } else {
                assert_ne!(line["status"], "ok", "{who}: {line}");
                assert!(
                    detail.contains("no memory cgroup for this caller"),
                    "{who}: {line}"
                );
                assert!(out.contains("cgroup=/\n"), "{who}: {r}");
            }
        }
    }
}

#[test]
fn in_a_userns_container_with_dockers_profile_runs_are_contained_and_check_agrees() {
    setting_holds(Setting::Docker);
}

#[test]
fn in_a_userns_pod_with_a_masked_proc_runs_are_contained_and_check_agrees() {
    setting_holds(Setting::Pod);
}

#[test]
fn in_a_userns_pod_with_an_unmasked_proc_runs_are_isolated_and_check_agrees() {
    setting_holds(Setting::Unmasked);
}

#[test]
fn in_a_userns_container_given_cap_sys_admin_and_an_unmasked_proc_runs_are_isolated() {
    setting_holds(Setting::DockerSysAdmin);
}
