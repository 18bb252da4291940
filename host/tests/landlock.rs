//! The Landlock layer against the real kernel: real programs (`sh`, `cat`, `ls`, `git`,
//! `kill`, `python3`) run in a child restricted with a prepared ruleset, as root and as
//! uid 65534, each attack beside a control showing it works without the layer.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;

use sandbox_host::landlock::{self as ll, Field, LandlockError, Mode, Prepared, Spec, Tcp};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A temporary HOME with fake secrets, a workspace inside it and a world-writable directory
/// outside the writable set, all reachable by uid 65534 so that controls work for it too.
struct World {
    _root: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

fn mode(p: &Path, m: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
}

fn write(p: &Path, text: &str, m: u32) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
    mode(p, m);
}

fn world() -> World {
    world_in(&std::env::temp_dir())
}

/// A [`world`] below `base`.
fn world_in(base: &Path) -> World {
    let dir = tempfile::Builder::new()
        .prefix("landlock-t")
        .tempdir_in(base)
        .unwrap();
    let root = dir.path().to_path_buf();
    mode(&root, 0o755);
    let home = root.join("home");
    let ws = home.join("proj");
    let outside = root.join("outside");
    for d in [&home, &ws, &outside] {
        fs::create_dir_all(d).unwrap();
    }
    write(&home.join(".ssh/id_rsa"), "SECRET-SSH", 0o644);
    write(&home.join(".netrc"), "SECRET-NETRC", 0o644);
    write(&home.join(".config/gh/hosts.yml"), "SECRET-GH", 0o644);
    write(&home.join(".config/other/ok"), "PUBLIC-CONFIG", 0o644);
    write(&home.join("notes.txt"), "PUBLIC-NOTES", 0o644);
    write(&home.join(".bashrc"), "# rc\n", 0o666);
    write(&ws.join("README"), "readme\n", 0o666);
    for d in [
        &home,
        &home.join(".ssh"),
        &home.join(".config"),
        &home.join(".config/gh"),
        &home.join(".config/other"),
    ] {
        mode(d, 0o755);
    }
    mode(&ws, 0o777);
    mode(&outside, 0o777);
    World {
        _root: dir,
        root,
        home,
        ws,
        outside,
    }
}

impl World {
    fn spec(&self) -> Spec {
        Spec {
            deny_read: ll::default_deny_read(&self.home),
            writable: vec![self.ws.clone()],
            tcp: Tcp::Any,
            scoped: false,
            own_terminals_only: false,
            covered: false,
        }
    }

    fn prepare(&self, spec: &Spec) -> Arc<Prepared> {
        Arc::new(ll::prepare(spec, Mode::Required, None).unwrap().unwrap())
    }

    /// `sh -c script` in the workspace with a bare environment and stdin from /dev/null,
    /// restricted by `layer` (applied with `restrict_self` in the child) when given.
    fn sh(&self, layer: Option<&Arc<Prepared>>, nobody: bool, script: &str) -> Output {
        self.try_sh(layer, nobody, script).expect("sh")
    }

    /// [`World::sh`], with the error of a program that could not be started.
    fn try_sh(
        &self,
        layer: Option<&Arc<Prepared>>,
        nobody: bool,
        script: &str,
    ) -> io::Result<Output> {
        let mut cmd = if nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid", "65534", "--regid", "65534", "--clear-groups"]);
            c.args(["sh", "-c", script]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        };
        cmd.env_clear()
            .env("PATH", PATH)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        if let Some(layer) = layer {
            let layer = Arc::clone(layer);
            // SAFETY: the closure only restricts the forked child before exec.
            unsafe {
                cmd.pre_exec(move || layer.restrict_self().map(|_| ()).map_err(io::Error::other));
            }
        }
        cmd.output()
    }
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} should work: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn denied(out: &Output, what: &str) {
    assert!(
        !out.status.success(),
        "{what} should be denied: stdout {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("SECRET"),
        "{what} leaked"
    );
}

/// Runs `script` confined (must fail) and then unconfined (must work: the control).
fn attack(w: &World, layer: &Arc<Prepared>, nobody: bool, what: &str, script: &str) {
    denied(&w.sh(Some(layer), nobody, script), what);
    ok(&w.sh(None, nobody, script), &format!("{what} (control)"));
}

#[test]
fn secrets_are_unreadable_as_root_and_nobody() {
    let w = world();
    let layer = w.prepare(&w.spec());
    let h = w.home.display();
    for nobody in [false, true] {
        attack(
            &w,
            &layer,
            nobody,
            "cat key",
            &format!("cat {h}/.ssh/id_rsa"),
        );
        attack(&w, &layer, nobody, "cat .netrc", &format!("cat {h}/.netrc"));
        attack(
            &w,
            &layer,
            nobody,
            "gh",
            &format!("cat {h}/.config/gh/hosts.yml"),
        );
        attack(&w, &layer, nobody, "ls .ssh", &format!("ls {h}/.ssh"));
        attack(
            &w,
            &layer,
            nobody,
            "via /proc/self/root",
            &format!("cat /proc/self/root{h}/.ssh/id_rsa"),
        );
        // Everything else stays readable.
        let out = w.sh(
            Some(&layer),
            nobody,
            &format!("cat {h}/notes.txt {h}/.config/other/ok README && ls / >/dev/null 2>&1; ls {h}/proj /usr/bin >/dev/null"),
        );
        ok(&out, "reading beside the secrets");
        assert!(String::from_utf8_lossy(&out.stdout).contains("PUBLIC-NOTES"));
    }
    // Ancestors of a denied path can be traversed but not listed (documented).
    denied(
        &w.sh(Some(&layer), false, &format!("ls {h}")),
        "listing HOME",
    );
    ok(
        &w.sh(None, false, &format!("ls {h}")),
        "listing HOME (control)",
    );
}

/// Rules planned for a view that covers the deny paths (`covered`: the job's init grants `/`
/// once the covers are mounted) carve nothing and grant no reading at all: applied anywhere
/// else, as here in a plain child, they let nothing be read or run (the shell's own `execve`
/// is refused), so they never give more than the carve-out. The status still reports `fs-read-deny`, marked
/// covered, and the deny paths found absent are the same. Control: the same spec carved reads
/// beside the secrets. The preload route, which has no view, always carves.
#[test]
fn covered_rules_carve_nothing_and_grant_no_reading() {
    let w = world();
    let carved = w.prepare(&w.spec());
    let mut spec = w.spec();
    spec.covered = true;
    let covered = w.prepare(&spec);
    let status = covered.status();
    assert!(status.enforced.contains(&"fs-read-deny".to_owned()));
    assert!(status.covered && !carved.status().covered);
    assert!(status
        .enforced_text()
        .contains("fs-read-deny (by the view's covers)"));
    assert_eq!(status.deny_read_absent, carved.status().deny_read_absent);
    // The workspace and the devices (at most eight) only: no rule beside a secret.
    let rules = |p: &Arc<Prepared>| p.raw_rules().unwrap().paths.len();
    assert!(rules(&covered) <= 1 + 8, "{}", rules(&covered));
    assert!(rules(&carved) > rules(&covered) + 5, "{}", rules(&carved));
    let h = w.home.display();
    for nobody in [false, true] {
        ok(
            &w.sh(Some(&carved), nobody, &format!("cat {h}/notes.txt")),
            "reading beside the secrets, carved (control)",
        );
        ok(
            &w.sh(None, nobody, &format!("cat {h}/.ssh/id_rsa")),
            "reading the key unconfined (control)",
        );
        let e = w
            .try_sh(
                Some(&covered),
                nobody,
                &format!("cat {h}/.ssh/id_rsa {h}/notes.txt"),
            )
            .expect_err("nothing may start under the covered rules alone");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }
    let text = ll::preload_value(&spec, Mode::Preferred, None).unwrap();
    assert!(
        text.contains(&format!("ro {h}/notes.txt")) && !text.contains(".ssh"),
        "{text}"
    );
}

#[test]
fn links_made_inside_do_not_reach_secrets() {
    let w = world();
    // A symlink beside `.ssh` made before the ruleset: it is not granted.
    std::os::unix::fs::symlink(w.home.join(".ssh"), w.home.join("keys")).unwrap();
    let layer = w.prepare(&w.spec());
    let h = w.home.display();
    attack(
        &w,
        &layer,
        false,
        "symlink beside",
        &format!("cat {h}/keys/id_rsa"),
    );
    attack(
        &w,
        &layer,
        false,
        "symlink made inside",
        &format!("ln -sf {h}/.ssh/id_rsa l && cat l"),
    );
    attack(
        &w,
        &layer,
        false,
        "hard link made inside",
        &format!("rm -f h; ln {h}/.ssh/id_rsa h && cat h"),
    );
}

#[test]
fn nested_absent_file_and_later_entries() {
    let w = world();
    let mut spec = w.spec();
    spec.deny_read = vec![
        w.home.join(".ssh"),
        w.home.join(".ssh/id_rsa"),
        w.home.join(".netrc"),
        w.home.join(".aws"),
    ];
    let layer = w.prepare(&spec);
    assert_eq!(*layer.status().deny_read_absent, [w.home.join(".aws")]);
    assert!(layer.status().enforced.contains(&"fs-read-deny".to_owned()));
    let h = w.home.display();
    attack(&w, &layer, false, "nested", &format!("cat {h}/.ssh/id_rsa"));
    attack(&w, &layer, false, "file", &format!("cat {h}/.netrc"));
    // Entries created beside a denied path after the ruleset was built stay unreadable.
    write(&w.home.join("later.txt"), "later", 0o644);
    attack(
        &w,
        &layer,
        false,
        "later sibling",
        &format!("cat {h}/later.txt"),
    );
    // Nothing denied: everything readable.
    let mut open = w.spec();
    open.deny_read.clear();
    let all = w.prepare(&open);
    ok(
        &w.sh(Some(&all), false, &format!("cat {h}/.ssh/id_rsa && ls {h}")),
        "no deny list",
    );
}

#[test]
fn writes_outside_the_writable_set_fail_as_root_and_nobody() {
    for nobody in [false, true] {
        let w = world();
        let o = w.outside.display();
        for f in ["a", "t", "t2", "u", "r", "w"] {
            write(&w.outside.join(f), "ORIG", 0o666);
        }
        let layer = w.prepare(&w.spec());
        let uniq = format!("/tmp/{}-x", w.root.file_name().unwrap().to_string_lossy());
        let cases = [
            ("create", format!("echo x > {o}/new")),
            ("append", format!("echo x >> {o}/a")),
            ("truncate", format!("truncate -s 0 {o}/t")),
            ("O_TRUNC", format!(": > {o}/t2")),
            ("unlink", format!("rm {o}/u")),
            (
                "rename",
                format!("python3 -c 'import os; os.rename(\"{o}/r\", \"{o}/r2\")'"),
            ),
            ("O_RDWR", format!("exec 3<>{o}/w")),
            ("mkdir", format!("mkdir {o}/d")),
            ("/tmp", format!("touch {uniq}")),
            ("dotfile", format!("echo x >> {}/.bashrc", w.home.display())),
        ];
        for (what, script) in &cases {
            denied(&w.sh(Some(&layer), nobody, script), what);
        }
        for f in ["a", "t", "t2", "w"] {
            assert_eq!(
                fs::read_to_string(w.outside.join(f)).unwrap(),
                "ORIG",
                "{f}"
            );
        }
        assert!(w.outside.join("u").exists() && w.outside.join("r").exists());
        for (what, script) in &cases {
            ok(&w.sh(None, nobody, script), &format!("{what} (control)"));
        }
        let _ = fs::remove_file(&uniq);
    }
}

#[test]
fn workspace_and_devices_are_writable() {
    let w = world();
    let layer = w.prepare(&w.spec());
    for nobody in [false, true] {
        let script = "set -e; echo a > f; echo b >> f; : > f; mkdir -p d/e; mv f d/e/g; \
            ln d/e/g h; ln -s h s; cat s; rm h s; rm -r d; truncate -s 0 README; \
            echo x > /dev/null; head -c 4 /dev/urandom > /dev/null; cat /dev/zero | head -c 1 >/dev/null";
        ok(
            &w.sh(Some(&layer), nobody, script),
            "writing in the workspace",
        );
    }
}

#[test]
fn links_and_renames_from_outside_into_the_workspace_fail() {
    let w = world();
    write(&w.outside.join("f"), "ORIG", 0o666);
    let layer = w.prepare(&w.spec());
    let o = w.outside.display();
    attack(
        &w,
        &layer,
        false,
        "hard link in",
        &format!("rm -f in; ln {o}/f in"),
    );
    attack(
        &w,
        &layer,
        false,
        "rename in",
        &format!("python3 -c 'import os; os.rename(\"{o}/f\", \"in2\")' && mv in2 {o}/f"),
    );
}

#[test]
fn git_works_in_the_workspace() {
    let w = world();
    let layer = w.prepare(&w.spec());
    let script = "set -e; g='git -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main'; \
        $g init -q .; $g add README; $g commit -qm one; $g branch side; $g checkout -q side; \
        echo s > s.txt; $g add s.txt; $g commit -qm two; $g checkout -q main; \
        $g merge -q --no-edit side; $g mv s.txt t.txt; $g commit -qm three; $g log --oneline | wc -l";
    let out = w.sh(Some(&layer), false, script);
    ok(&out, "git");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn alive(c: &mut Child) -> bool {
    c.try_wait().unwrap().is_none()
}

#[test]
fn proc_mem_of_an_outside_process_is_not_writable() {
    let w = world();
    let layer = w.prepare(&w.spec());
    let mut s = sleeper();
    let script = format!("python3 -c 'open(\"/proc/{}/mem\", \"r+b\")'", s.id());
    attack(&w, &layer, false, "/proc/pid/mem", &script);
    let _ = s.kill();
    let _ = s.wait();
}

#[test]
fn scopes_keep_signals_inside() {
    let w = world();
    let mut spec = w.spec();
    spec.scoped = true;
    let layer = w.prepare(&spec);
    let st = layer.status();
    assert!(st.enforced.contains(&"scope-signal".to_owned()), "{st:?}");

    let mut s = sleeper();
    let pid = s.id();
    attack(&w, &layer, false, "kill -0", &format!("kill -0 {pid}"));
    denied(
        &w.sh(Some(&layer), false, &format!("kill -TERM {pid}")),
        "SIGTERM",
    );
    assert!(alive(&mut s), "the outside process survived");
    // Inside the domain signals still work.
    ok(
        &w.sh(
            Some(&layer),
            false,
            "sleep 30 & p=$!; kill -0 $p && kill $p; wait $p; test $? -gt 128",
        ),
        "signal inside",
    );
    let _ = s.kill();
    let _ = s.wait();

    // SIGIO set up with F_SETOWN towards an outside process that blocks SIGIO, so that a
    // signal sent shows as pending in its /proc status instead of racing with its death.
    let mut target = Command::new("python3")
        .args([
            "-c",
            "import signal, time; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO]); \
             print('ready', flush=True); time.sleep(30)",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    io::BufRead::read_line(
        &mut io::BufReader::new(target.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let tpid = target.id();
    let sigio_pending = || {
        let status = fs::read_to_string(format!("/proc/{tpid}/status")).unwrap();
        let shd = status
            .lines()
            .find_map(|l| l.strip_prefix("ShdPnd:"))
            .unwrap();
        u64::from_str_radix(shd.trim(), 16).unwrap() & (1 << (libc::SIGIO - 1)) != 0
    };
    let sigio = format!(
        "python3 -c 'import os, fcntl; r, w = os.pipe(); fcntl.fcntl(r, fcntl.F_SETOWN, {tpid}); \
         fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC); os.write(w, b\"x\")'"
    );
    ok(&w.sh(Some(&layer), false, &sigio), "SIGIO attempt runs");
    assert!(!sigio_pending(), "SIGIO reached the outside process");
    ok(&w.sh(None, false, &sigio), "SIGIO (control)");
    assert!(
        sigio_pending(),
        "control: SIGIO is pending in the outside process"
    );
    let _ = target.kill();
    let _ = target.wait();

    let mut s = sleeper();
    ok(
        &w.sh(None, false, &format!("kill -TERM {}", s.id())),
        "SIGTERM (control)",
    );
    assert!(!s.wait().unwrap().success());
}

#[test]
fn scopes_keep_abstract_sockets_inside() {
    let w = world();
    let mut spec = w.spec();
    spec.scoped = true;
    let layer = w.prepare(&spec);
    let name = format!("landlock-t-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = UnixListener::bind_addr(&addr).unwrap();
    let script = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\")'"
    );
    attack(&w, &layer, false, "abstract connect", &script);
}

fn connect(port: u16) -> String {
    format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'")
}

#[test]
fn tcp_deny_and_ports() {
    let w = world();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut spec = w.spec();
    spec.tcp = Tcp::Deny;
    let deny = w.prepare(&spec);
    attack(&w, &deny, false, "tcp connect", &connect(port));
    denied(
        &w.sh(
            Some(&deny),
            false,
            "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0))'",
        ),
        "tcp bind",
    );
    spec.tcp = Tcp::Ports(vec![port]);
    let ports = w.prepare(&spec);
    ok(&w.sh(Some(&ports), false, &connect(port)), "listed port");
    spec.tcp = Tcp::Ports(vec![port.wrapping_add(1).max(1)]);
    let other = w.prepare(&spec);
    denied(&w.sh(Some(&other), false, &connect(port)), "unlisted port");
}

#[test]
fn degraded_abi_is_reported_or_refused() {
    let w = world();
    let mut spec = w.spec();
    spec.tcp = Tcp::Deny;
    spec.scoped = true;
    let p = ll::prepare(&spec, Mode::Preferred, Some(3))
        .unwrap()
        .unwrap();
    let st = p.status();
    assert_eq!(st.abi.used, 3);
    assert_eq!(st.abi.kernel, ll::abi().unwrap());
    assert_eq!(st.enforced, vec!["fs-read-deny", "fs-write"]);
    let missing = st.missing.join("; ");
    for word in [
        "ABI 4 (TCP",
        "ABI 6 (signal",
        "ABI 6 (abstract unix",
        "ABI 5 (device ioctl",
    ] {
        assert!(missing.contains(word), "{missing}");
    }
    // The file rules still hold at ABI 3.
    let layer = Arc::new(p);
    attack(
        &w,
        &layer,
        false,
        "cat key at ABI 3",
        &format!("cat {}/.ssh/id_rsa", w.home.display()),
    );

    let err = ll::prepare(&spec, Mode::Required, Some(3)).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, LandlockError::Unavailable { used: 3, .. }),
        "{err:?}"
    );
    assert!(text.contains("Landlock ABI 4 (TCP restriction)"), "{text}");
    assert!(text.contains("Landlock ABI 6 (signal scoping)"), "{text}");
    assert!(text.contains("limited to ABI 3"), "{text}");

    let none = ll::prepare(&spec, Mode::Preferred, Some(0))
        .unwrap()
        .unwrap();
    assert_eq!(none.raw_fd().unwrap(), -1);
    assert!(none.status().enforced.is_empty());
    assert!(ll::prepare(&spec, Mode::Off, None).unwrap().is_none());
}

#[test]
fn hostile_input_gives_typed_errors() {
    let w = world();
    let base = w.spec();
    let cases: Vec<(Spec, Field)> = vec![
        (
            Spec {
                writable: vec!["relative/dir".into()],
                ..base.clone()
            },
            Field::WritablePaths,
        ),
        (
            Spec {
                writable: vec![w.root.join("missing")],
                ..base.clone()
            },
            Field::WritablePaths,
        ),
        (
            Spec {
                writable: vec![w.root.join("a\nrw /")],
                ..base.clone()
            },
            Field::WritablePaths,
        ),
        (
            Spec {
                writable: vec![PathBuf::from("/tmp/a\0b")],
                ..base.clone()
            },
            Field::WritablePaths,
        ),
        (
            Spec {
                deny_read: vec!["..".into()],
                ..base.clone()
            },
            Field::DenyRead,
        ),
        (
            Spec {
                deny_read: vec!["/x\ny".into()],
                ..base.clone()
            },
            Field::DenyRead,
        ),
    ];
    for (spec, field) in cases {
        let err = ll::validate(&spec).unwrap_err();
        assert_eq!(err.field(), Some(field), "{err}");
        assert!(err.to_string().starts_with(field.as_str()), "{err}");
        let err = ll::prepare(&spec, Mode::Preferred, None).unwrap_err();
        assert_eq!(err.field(), Some(field), "{err}");
        assert!(ll::preload_value(&spec, Mode::Preferred, None).is_err());
    }
    let err = ll::validate_writable(Field::Workspace, Path::new("proj")).unwrap_err();
    assert!(matches!(
        err,
        LandlockError::NotAbsolute {
            field: Field::Workspace,
            ..
        }
    ));
    let err = "strict".parse::<Mode>().unwrap_err().to_string();
    assert!(err.contains("required, preferred or off"), "{err}");
    assert_eq!("off".parse::<Mode>().unwrap(), Mode::Off);
    assert_eq!(Mode::default(), Mode::Preferred);
}

#[test]
fn preload_value_lists_the_rules() {
    let w = world();
    let mut spec = w.spec();
    spec.tcp = Tcp::Ports(vec![80, 443]);
    spec.scoped = true;
    let text = ll::preload_value(&spec, Mode::Preferred, None).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..5],
        [
            "landlock 1",
            "mode preferred",
            "scope signal",
            "scope abstract",
            "tcp ports 80,443"
        ]
    );
    let ws = format!("rw {}", w.ws.display());
    assert!(lines.contains(&ws.as_str()), "{text}");
    assert!(lines.contains(&"dev /dev/null"), "{text}");
    assert!(lines.contains(&format!("ro {}/notes.txt", w.home.display()).as_str()));
    assert!(lines.contains(&"ro /usr"), "{text}");
    for l in &lines[5..] {
        assert!(!l.contains(".ssh") && !l.contains(".netrc"), "{l}");
        assert_ne!(*l, format!("ro {}", w.home.display()));
        assert_ne!(*l, "ro /");
    }
    spec.tcp = Tcp::Deny;
    spec.deny_read.clear();
    spec.scoped = false;
    let text = ll::preload_value(&spec, Mode::Required, Some(6)).unwrap();
    assert!(
        text.starts_with("landlock 1\nmode required\nabi 6\ntcp deny\nro /\n"),
        "{text}"
    );
    // `required` is checked where the variables are made, with the host's error.
    let e = ll::preload_value(&spec, Mode::Required, Some(3)).unwrap_err();
    assert!(e.to_string().contains("ABI 4"), "{e}");
}

#[test]
fn deny_paths_sharing_a_listed_parent_and_dot_dot() {
    // Four absent deny paths in the workspace make the planner list it once instead of
    // looking each up; a fifth path leaves it with `..`, which no listing holds: it must be
    // resolved, not taken for absent.
    let w = world();
    let mut spec = w.spec();
    spec.deny_read = ["a", "b", "c", "d", "../.ssh", "../.netrc"]
        .iter()
        .map(|n| w.ws.join(n))
        .collect();
    let layer = w.prepare(&spec);
    let absent: Vec<PathBuf> = ["a", "b", "c", "d"].iter().map(|n| w.ws.join(n)).collect();
    assert_eq!(*layer.status().deny_read_absent, *absent);
    let h = w.home.display();
    attack(&w, &layer, false, "via ..", &format!("cat {h}/.ssh/id_rsa"));
    attack(
        &w,
        &layer,
        true,
        "via .. as nobody",
        &format!("cat {h}/.netrc"),
    );
    // Control: without those entries the same files are readable.
    spec.deny_read.truncate(4);
    let open = w.prepare(&spec);
    ok(
        &w.sh(
            Some(&open),
            false,
            &format!("cat {h}/.ssh/id_rsa {h}/.netrc"),
        ),
        "no deny entry",
    );
}

/// How long after its last change a watched directory lets a cached ruleset be reused
/// (`UNSETTLED` in landlock.rs), with a margin.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(2200);

/// A world below the target's temporary directory, which the other tests of this binary
/// (working in /tmp) leave alone, once its directories have settled: a cached ruleset is not
/// reused while a directory it watches changed within the last two seconds.
fn settled_world() -> World {
    let w = world_in(Path::new(env!("CARGO_TARGET_TMPDIR")));
    std::thread::sleep(SETTLE);
    w
}

/// The same ruleset twice from the cache, once nothing it watches changes.
fn cached_twice(spec: &Spec) -> Arc<Prepared> {
    let get = || {
        ll::prepare_cached(spec, Mode::Required, None)
            .unwrap()
            .unwrap()
    };
    let mut a = get();
    for _ in 0..20 {
        let b = get();
        if Arc::ptr_eq(&a, &b) {
            return a;
        }
        // Something watched changed (a directory above the world): wait until it settles.
        std::thread::sleep(SETTLE);
        a = b;
    }
    panic!("the cache never served the same ruleset twice");
}

#[test]
fn one_cached_ruleset_serves_many_children() {
    let w = settled_world();
    let spec = w.spec();
    let a = cached_twice(&spec);
    // The integrator's route: the raw fd, after no_new_privs, in several children.
    for _ in 0..3 {
        let fd = a.raw_fd().unwrap();
        let mut cmd = Command::new("cat");
        cmd.arg(w.home.join(".ssh/id_rsa")).stdin(Stdio::null());
        // SAFETY: only async-signal-safe syscalls in the forked child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        denied(&cmd.output().unwrap(), "cat key via raw fd");
        denied(
            &w.sh(Some(&a), false, "cat ../.ssh/id_rsa"),
            "cat key via restrict_self",
        );
    }
    // A change along the carve-out makes the next request rebuild.
    write(&w.home.join("new.txt"), "new", 0o644);
    let c = ll::prepare_cached(&spec, Mode::Required, None)
        .unwrap()
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    ok(
        &w.sh(Some(&c), false, "cat ../new.txt"),
        "new sibling after rebuild",
    );
}

/// The stale-cache attack: a keyring file is created after a ruleset was cached, in a directory
/// the carve-out watches (the deny path's nearest existing directory), and that directory's
/// mtime and atime are set back with `utimensat`, as any writer can. The next request must not
/// reuse the ruleset. Control: the directory's old stamp (device, inode, mtime) is the same
/// after the reset, and the stale ruleset reads the new keyring.
#[test]
fn a_reset_mtime_does_not_keep_a_stale_cached_ruleset() {
    use std::os::unix::fs::MetadataExt;
    let w = settled_world();
    let share = w.home.join(".local/share");
    fs::create_dir_all(&share).unwrap();
    for d in [w.home.join(".local"), share.clone()] {
        mode(&d, 0o755);
    }
    std::thread::sleep(SETTLE);
    let spec = w.spec();
    let stale = cached_twice(&spec);
    let old_stamp = |m: &fs::Metadata| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec());
    let before = fs::metadata(&share).unwrap();

    write(
        &share.join("keyrings/login.keyring"),
        "SECRET-KEYRING",
        0o644,
    );
    let times = fs::FileTimes::new()
        .set_modified(before.modified().unwrap())
        .set_accessed(before.accessed().unwrap());
    fs::File::open(&share).unwrap().set_times(times).unwrap();
    let after = fs::metadata(&share).unwrap();
    let keyring = format!("cat {}", share.join("keyrings/login.keyring").display());

    // Control: by its mtime the directory has not changed, and the ruleset built before the
    // keyring existed reads it.
    assert_eq!(old_stamp(&after), old_stamp(&before), "mtime reset");
    let o = w.sh(Some(&stale), false, &keyring);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "SECRET-KEYRING");

    // The cache rebuilds, and the new ruleset denies the keyring.
    let fresh = ll::prepare_cached(&spec, Mode::Required, None)
        .unwrap()
        .unwrap();
    assert!(!Arc::ptr_eq(&stale, &fresh), "the stale ruleset was reused");
    for nobody in [false, true] {
        denied(
            &w.sh(Some(&fresh), nobody, &keyring),
            "keyring after the reset",
        );
    }
}

/// Python code connecting to `port` with an MPTCP socket (protocol 0 for plain TCP).
fn py_connect(port: u16, protocol: u32) -> String {
    format!(
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, {protocol}); \
         s.settimeout(2); s.connect((\"127.0.0.1\", {port})); print(\"connected\")"
    )
}

fn mptcp_connect(port: u16) -> String {
    format!("python3 -c '{}'", py_connect(port, 262))
}

#[test]
fn mptcp_cannot_bypass_port_rules() {
    // The hole: Landlock's TCP rules do not cover MPTCP, so with a port list that does not
    // include the listener's port, an MPTCP socket still connects (the control).
    let w = world();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut spec = w.spec();
    spec.tcp = Tcp::Ports(vec![port.wrapping_add(1).max(1)]);
    let other = w.prepare(&spec);
    denied(
        &w.sh(Some(&other), false, &connect(port)),
        "plain TCP to an unlisted port",
    );
    ok(
        &w.sh(Some(&other), false, &mptcp_connect(port)),
        "MPTCP past the Landlock port rules (the hole the filter closes)",
    );
    // Through the engine, port rules come with the filter's refusal of MPTCP sockets.
    let run = |ports: &str, protocol: u32| {
        Command::new(env!("CARGO_BIN_EXE_sandbox"))
            .args(["run", "--allow-root", "--profile", "network"])
            .args(["--connect-ports", ports, "--", "/usr/bin/python3", "-c"])
            .arg(py_connect(port, protocol))
            .current_dir(&w.ws)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let refused = run(&port.wrapping_add(1).max(1).to_string(), 262);
    assert!(!refused.status.success(), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("Protocol not supported"), "{err}");
    // With the listener's port listed, MPTCP is still refused (the filter cannot see ports)
    // but plain TCP works: programs fall back to it on EPROTONOSUPPORT.
    let listed = run(&port.to_string(), 262);
    assert!(!listed.status.success(), "{listed:?}");
    let tcp = run(&port.to_string(), 0);
    assert!(tcp.status.success(), "{tcp:?}");
}
