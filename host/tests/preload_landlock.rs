//! The Landlock layer on the preload route: `sandbox env` prints `SANDBOX_LANDLOCK` (and
//! `LD_PRELOAD`, `TMPDIR`), and `libsandbox.so` applies it before `main`, for agents that only
//! set variables. Each attack has a control with `--landlock off`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A home with a credential, and a workspace beside it; readable by everyone, so that the
/// unprivileged runs' controls can read the secret without the layer.
struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    for d in [&home.join(".ssh"), &ws, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    for d in [&home, &home.join(".ssh"), &ws, &outside] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), "SECRET\n").unwrap();
    std::fs::write(home.join("notes.txt"), "notes\n").unwrap();
    World {
        _dir: dir,
        home,
        ws,
        outside,
    }
}

impl World {
    /// `sandbox env --json` with `args`, run in the workspace with the world's HOME.
    fn env(&self, args: &[&str]) -> BTreeMap<String, String> {
        self.env_as(false, args)
    }

    /// The same, run as nobody when asked (whose library is extracted in the world's HOME,
    /// where nobody can read it).
    fn env_as(&self, nobody: bool, args: &[&str]) -> BTreeMap<String, String> {
        let o = if nobody {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .args([SANDBOX, "env", "--json"])
                .args(args)
                .current_dir(&self.ws)
                .env_clear()
                .env("PATH", PATH)
                .env("HOME", &self.home)
                .output()
                .unwrap()
        } else {
            self.sandbox_env(args, &[])
        };
        assert!(o.status.success(), "{o:?}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    }

    fn sandbox_env(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        Command::new(SANDBOX)
            .args(["env", "--json", "--allow-root"])
            .args(args)
            .current_dir(&self.ws)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", &self.home)
            .envs(extra_env.iter().copied())
            .output()
            .unwrap()
    }

    /// Runs `argv` in the workspace with `vars` and an agent's environment, optionally as
    /// nobody.
    fn run(&self, vars: &BTreeMap<String, String>, nobody: bool, argv: &[&str]) -> Output {
        let mut vars = vars.clone();
        let mut c = if nobody {
            // setpriv itself must not load the library (its setresuid would be refused):
            // `env` sets LD_PRELOAD for the program alone.
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c.arg("/usr/bin/env");
            if let Some(p) = vars.remove("LD_PRELOAD") {
                c.arg(format!("LD_PRELOAD={p}"));
            }
            c.args(argv);
            c
        } else {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        };
        c.env_clear()
            .env("PATH", PATH)
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .envs(&vars)
            .current_dir(&self.ws)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{:?} stdout {} stderr {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn env_prints_the_layer_and_a_private_tmpdir() {
    let w = world();
    let vars = w.env(&["--profile", "write"]);
    let ll = &vars["SANDBOX_LANDLOCK"];
    assert!(ll.starts_with("landlock 1\nmode preferred\n"), "{ll}");
    assert!(ll.contains(&format!("rw {}", w.ws.display())), "{ll}");
    assert!(!ll.contains(".ssh"), "{ll}");
    assert!(vars.contains_key("LD_PRELOAD"));
    let tmp = Path::new(&vars["TMPDIR"]);
    let mode = std::fs::metadata(tmp).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{}", tmp.display());
    assert!(ll.contains(&format!("rw {}", tmp.display())), "{ll}");
    // Off: no layer, no TMPDIR.
    let off = w.env(&["--profile", "write", "--landlock", "off"]);
    assert!(!off.contains_key("SANDBOX_LANDLOCK") && !off.contains_key("TMPDIR"));
    // Unrestricted has no filter, but the layer still needs the library.
    let un = w.env(&["--profile", "unrestricted"]);
    assert!(un.contains_key("LD_PRELOAD") && un.contains_key("SANDBOX_LANDLOCK"));
    assert!(!un.contains_key("SECCOMP_SYSCALL_ALLOW"));
}

#[test]
fn credentials_are_unreadable_as_root_and_nobody() {
    let w = world();
    let secret = w.home.join(".ssh/id_rsa");
    let secret = secret.to_str().unwrap();
    for nobody in [false, true] {
        let on = w.env_as(nobody, &["--profile", "shell"]);
        let off = w.env_as(nobody, &["--profile", "shell", "--landlock", "off"]);
        let o = w.run(&on, nobody, &["/bin/cat", secret]);
        assert!(!o.status.success(), "{}", text(&o));
        assert!(!text(&o).contains("SECRET"), "{}", text(&o));
        // A child of a child inherits the domain (the variable itself is gone by then).
        let o = w.run(&on, nobody, &["/bin/sh", "-c", &format!("cat {secret}")]);
        assert!(!text(&o).contains("SECRET"), "{}", text(&o));
        let notes = w.home.join("notes.txt");
        let o = w.run(&on, nobody, &["/bin/cat", notes.to_str().unwrap()]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "notes\n",
            "{}",
            text(&o)
        );
        let control = w.run(&off, nobody, &["/bin/cat", secret]);
        assert_eq!(
            String::from_utf8_lossy(&control.stdout),
            "SECRET\n",
            "{}",
            text(&control)
        );
    }
}

/// The stores of the review's finding (`profiles/credentials.toml`) on the preload route, with
/// a settings file beside one that stays readable; `/etc/shadow` for root.
#[test]
fn the_credential_list_holds_on_the_preload_route() {
    let w = world();
    let claude = w.home.join(".claude/.credentials.json");
    let cargo = w.home.join(".cargo/credentials.toml");
    let plain = w.home.join(".cargo/config.toml");
    for (p, text) in [
        (&claude, "SECRET-CLAUDE\n"),
        (&cargo, "SECRET-CARGO\n"),
        (&plain, "PLAIN\n"),
    ] {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    for nobody in [false, true] {
        let on = w.env_as(nobody, &["--profile", "shell"]);
        let off = w.env_as(nobody, &["--profile", "shell", "--landlock", "off"]);
        for secret in [&claude, &cargo] {
            let secret = secret.to_str().unwrap();
            let o = w.run(&on, nobody, &["/bin/cat", secret]);
            assert!(!o.status.success(), "{secret}: {}", text(&o));
            assert!(!text(&o).contains("SECRET"), "{secret}: {}", text(&o));
            let control = w.run(&off, nobody, &["/bin/cat", secret]);
            assert!(
                String::from_utf8_lossy(&control.stdout).starts_with("SECRET-"),
                "{secret} (control): {}",
                text(&control)
            );
        }
        let o = w.run(&on, nobody, &["/bin/cat", plain.to_str().unwrap()]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "PLAIN\n",
            "{}",
            text(&o)
        );
    }
    let on = w.env(&["--profile", "shell"]);
    let off = w.env(&["--profile", "shell", "--landlock", "off"]);
    let o = w.run(&on, false, &["/bin/cat", "/etc/shadow"]);
    assert!(!o.status.success() && o.stdout.is_empty(), "{}", text(&o));
    let control = w.run(&off, false, &["/bin/cat", "/etc/shadow"]);
    assert!(control.stdout.starts_with(b"root:"), "{}", text(&control));
}

#[test]
fn writes_only_in_the_workspace_and_tmpdir() {
    let w = world();
    let target = w.outside.join("planted");
    for nobody in [false, true] {
        let on = w.env_as(nobody, &["--profile", "shell"]);
        let off = w.env_as(nobody, &["--profile", "shell", "--landlock", "off"]);
        let script = format!(
            "echo x > {}; echo ws > {}/made-{nobody} && echo tmp > \"$TMPDIR/t-{nobody}\" && echo done",
            target.display(),
            w.ws.display()
        );
        let o = w.run(&on, nobody, &["/bin/sh", "-c", &script]);
        assert!(!target.exists(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("done"),
            "{}",
            text(&o)
        );
        let control = w.run(&off, nobody, &["/bin/sh", "-c", &script]);
        assert!(target.exists(), "{}", text(&control));
        std::fs::remove_file(&target).unwrap();
    }
}

#[test]
fn signals_do_not_leave_the_sandbox() {
    let w = world();
    let mut outside = Command::new("sleep").arg("30").spawn().unwrap();
    let kill = format!("kill -TERM {}", outside.id());
    let on = w.env(&["--profile", "shell"]);
    let o = w.run(&on, false, &["/bin/sh", "-c", &kill]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        outside.try_wait().unwrap().is_none(),
        "the outside process was killed"
    );
    let off = w.env(&["--profile", "shell", "--landlock", "off"]);
    let o = w.run(&off, false, &["/bin/sh", "-c", &kill]);
    assert!(o.status.success(), "{}", text(&o));
    let _ = outside.wait();
}

#[test]
fn the_program_does_not_see_the_variable() {
    let w = world();
    let on = w.env(&["--profile", "shell"]);
    let o = w.run(&on, false, &["/usr/bin/env"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("SANDBOX_LANDLOCK") && !out.contains("SECCOMP_"),
        "{out}"
    );
}

#[test]
fn shell_output_evaluates_to_the_same_variables() {
    // `eval "$(sandbox env)"` as the README shows: the multi-line value survives quoting.
    let w = world();
    let secret = w.home.join(".ssh/id_rsa");
    let script = format!(
        "eval \"$({SANDBOX} env --allow-root --profile shell)\" && /bin/cat {}; echo rc=$?",
        secret.display()
    );
    let o = w.run(&BTreeMap::new(), false, &["/bin/sh", "-c", &script]);
    let out = text(&o);
    assert!(out.contains("rc=1") && !out.contains("SECRET"), "{out}");
}

#[test]
fn degraded_kernels_are_refused_or_reported() {
    let w = world();
    // Where the variables are made: `required` on an ABI without scopes is refused there.
    let o = w.sandbox_env(
        &["--landlock", "required"],
        &[("SANDBOX_LANDLOCK_MAX_ABI", "3")],
    );
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("ABI"),
        "{}",
        text(&o)
    );
    // Where the command runs: the library checks again (variables made elsewhere).
    let mut vars = w.env(&["--profile", "shell", "--landlock", "required"]);
    let ll = vars["SANDBOX_LANDLOCK"].replacen("mode required\n", "mode required\nabi 3\n", 1);
    vars.insert("SANDBOX_LANDLOCK".into(), ll);
    let o = w.run(&vars, false, &["/bin/echo", "ran"]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("ran"));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not available"),
        "{}",
        text(&o)
    );
    // `preferred` runs with what there is, and says so on every run.
    let vars = {
        let o = w.sandbox_env(
            &["--profile", "shell"],
            &[("SANDBOX_LANDLOCK_MAX_ABI", "3")],
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    let o = w.run(&vars, false, &["/bin/echo", "ran"]);
    assert!(o.status.success(), "{}", text(&o));
    // Every missing protection is named, not only the first.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(
            "libsandbox: Landlock protections missing: device ioctl restriction, TCP \
             restriction, signal scoping, abstract unix socket scoping (kernel ABI "
        ) && err.ends_with(", used 3)\n")
            && err.lines().count() == 1,
        "{}",
        text(&o)
    );
}

#[test]
fn hostile_values_end_the_program_before_main() {
    let w = world();
    let mut vars = w.env(&["--profile", "shell"]);
    for bad in [
        "",
        "landlock 2",
        "landlock 1\nrw relative/path",
        "landlock 1\ntcp ports 0",
        "landlock 1\ntcp ports 99999",
        "landlock 1\nabi x",
        "landlock 1\nro /\nsomething else",
        "mode preferred\nlandlock 1",
    ] {
        vars.insert("SANDBOX_LANDLOCK".into(), bad.into());
        let o = w.run(&vars, false, &["/bin/echo", "ran"]);
        assert_eq!(o.status.code(), Some(125), "{bad:?}: {}", text(&o));
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("ran"),
            "{bad:?}"
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).starts_with("libsandbox: SANDBOX_LANDLOCK: line"),
            "{bad:?}: {}",
            text(&o)
        );
    }
}

#[test]
fn port_rules_and_mptcp_on_the_preload_route() {
    let w = world();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let other = port.wrapping_add(1).max(1).to_string();
    let vars = w.env(&["--profile", "network", "--connect-ports", &other]);
    assert!(
        vars["SECCOMP_SYSCALL_DENY"].contains("IPPROTO_MPTCP"),
        "{vars:?}"
    );
    let connect = |proto: u32| {
        format!(
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, {proto}); \
             s.settimeout(2); s.connect(('127.0.0.1', {port})); print('connected')"
        )
    };
    for proto in [0, 262] {
        let o = w.run(&vars, false, &["/usr/bin/python3", "-c", &connect(proto)]);
        assert!(!o.status.success(), "protocol {proto}: {}", text(&o));
    }
    let open = w.env(&["--profile", "network", "--landlock", "off"]);
    let o = w.run(&open, false, &["/usr/bin/python3", "-c", &connect(0)]);
    assert!(o.status.success(), "control: {}", text(&o));
}
