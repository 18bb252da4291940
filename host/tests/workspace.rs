//! The broad-workspace refusal on every front end (`run`, `exec --json`, `serve`, the
//! library): a workspace that is `/`, the caller's home, a parent of it or a directory holding
//! credentials is refused unless named and allowed, as root and as uid 65534, with controls
//! showing the write it prevents lands without it.

mod common;

use common::{command, output_with_input, As, BOTH, SANDBOX};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A caller's home for `who` inside a fresh directory: `<tmp>/home`, holding `.bashrc` and a
/// `project` directory, all writable by `who`.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("project")).unwrap();
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
        for p in [
            dir.path(),
            &home,
            &home.join("project"),
            &home.join(".config"),
            &home.join(".bashrc"),
        ] {
            let mode = if p.is_dir() { 0o777 } else { 0o666 };
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Home { _dir: dir, home }
    }

    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.home.clone()
        } else {
            self.home.join(rel)
        }
    }

    fn bashrc(&self) -> String {
        std::fs::read_to_string(self.home.join(".bashrc")).unwrap()
    }
}

/// `sandbox ARGS` as `who` through `bash -c`, from `cwd`, with `HOME` the test's home.
fn agent(who: As, home: &Path, cwd: &Path, args: &str) -> Output {
    let mut c = command(who, "/bin/bash");
    c.args(["-c", &format!("{SANDBOX} {args}")])
        .env("HOME", home)
        .current_dir(cwd);
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The line that appends to `.bashrc` in the working directory or the home.
const APPEND: &str = "/bin/bash -c 'echo planted >> \"$HOME/.bashrc\"'";

/// Asserts a refusal: status 125, one stderr line naming `flag` and saying `says`.
fn refused(o: &Output, flag: &str, says: &str, what: &str) {
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{what}: {e}");
    assert_eq!(e.lines().count(), 1, "{what}: one line: {e}");
    assert!(
        e.starts_with(&format!("sandbox: {flag}: ")) && e.contains(says),
        "{what}: {e}"
    );
}

#[test]
fn the_home_directory_as_default_workspace_is_refused() {
    for who in BOTH {
        let h = Home::new();
        let home = h.path("");
        // Control: with the Landlock layer off (nothing confined, no workspace), the shell
        // job started from the home appends to .bashrc.
        let o = agent(
            who,
            &home,
            &home,
            &format!("run --allow-root --profile shell --landlock off -- {APPEND}"),
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert!(h.bashrc().contains("planted"), "{who:?}: control failed");
        std::fs::write(h.path(".bashrc"), "# rc\n").unwrap();

        let o = agent(
            who,
            &home,
            &home,
            &format!("run --allow-root --profile shell -- {APPEND}"),
        );
        refused(
            &o,
            "--workspace",
            "the working directory",
            &format!("{who:?} home"),
        );
        assert!(text(&o.stderr).contains("the caller's home directory"));
        assert_eq!(h.bashrc(), "# rc\n", "{who:?}: written");
        // The flag does not make the default workspace acceptable.
        let o = agent(
            who,
            &home,
            &home,
            &format!("run --allow-root --profile shell --allow-broad-workspace -- {APPEND}"),
        );
        refused(
            &o,
            "--allow-broad-workspace",
            "named workspace only",
            "flag alone",
        );
        assert_eq!(h.bashrc(), "# rc\n", "{who:?}: written");
        // A project directory below the home is an ordinary workspace.
        let o = agent(
            who,
            &home,
            &h.path("project"),
            "run --allow-root --profile shell -- /bin/bash -c 'echo x > made'",
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{who:?}");
        assert!(h.path("project/made").exists(), "{who:?}");
    }
}

#[test]
fn the_root_directory_as_default_workspace_is_refused() {
    for who in BOTH {
        let h = Home::new();
        let o = agent(
            who,
            &h.path(""),
            Path::new("/"),
            "run --allow-root --profile shell -- /bin/true",
        );
        refused(
            &o,
            "--workspace",
            "the root directory",
            &format!("{who:?} /"),
        );
        // Control: the same run from a project directory runs.
        let o = agent(
            who,
            &h.path(""),
            &h.path("project"),
            "run --allow-root --profile shell -- /bin/true",
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
    }
}

#[test]
fn named_broad_workspaces_are_refused_unless_allowed() {
    for who in BOTH {
        let h = Home::new();
        let home = h.path("");
        let parent = home.parent().unwrap().to_path_buf();
        for (dir, says) in [
            (home.clone(), "the caller's home directory"),
            (parent.clone(), "a parent of the caller's home directory"),
            (PathBuf::from("/"), "the root directory"),
            (h.path(".config"), "holding the credential path"),
            (home.join("project/.."), "the caller's home directory"),
        ] {
            let o = agent(
                who,
                &home,
                &h.path("project"),
                &format!(
                    "run --allow-root --profile shell --workspace '{}' -- {APPEND}",
                    dir.display()
                ),
            );
            refused(
                &o,
                "--workspace",
                says,
                &format!("{who:?} {}", dir.display()),
            );
            assert!(text(&o.stderr).contains("--allow-broad-workspace"));
            assert_eq!(h.bashrc(), "# rc\n", "{who:?}: written");
        }
        // Read-only profiles too: their filter leaves opening existing files for reading and
        // writing (O_RDWR) open, so a named workspace is a real write grant.
        let o = agent(
            who,
            &home,
            &h.path("project"),
            &format!(
                "run --allow-root --workspace '{}' -- /bin/true",
                home.display()
            ),
        );
        refused(
            &o,
            "--workspace",
            "home directory",
            &format!("{who:?} minimal"),
        );

        // Allowed when named with the flag: the write lands, and the run says so.
        let o = agent(
            who,
            &home,
            &h.path("project"),
            &format!(
                "run --allow-root --profile shell --workspace '{}' --allow-broad-workspace -- \
                 {APPEND}",
                home.display()
            ),
        );
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{who:?}: {e}");
        assert!(
            e.starts_with("sandbox: warning: the workspace ")
                && e.contains("allowed by --allow-broad-workspace"),
            "{who:?}: {e}"
        );
        assert!(h.bashrc().contains("planted"), "{who:?}");
    }
}

#[test]
fn sandbox_env_refuses_a_broad_workspace_and_says_when_allowed() {
    for who in BOTH {
        let h = Home::new();
        let home = h.path("");
        let o = agent(who, &home, &home, "env --profile shell");
        refused(
            &o,
            "--workspace",
            "the working directory",
            &format!("{who:?} env"),
        );
        assert_eq!(text(&o.stdout), "", "{who:?}: printed variables");
        // Control: from a project directory it prints the variables, quietly (`--quiet`: the
        // preload route's one-time note is not what this test is about; `--isolation off`:
        // nor is its every-call line on what it cannot put back).
        let o = agent(
            who,
            &home,
            &h.path("project"),
            "env --quiet --isolation off --profile shell",
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert!(text(&o.stdout).contains("SANDBOX_LANDLOCK"), "{who:?}");
        assert_eq!(text(&o.stderr), "", "{who:?}");
        // Named and allowed: printed, with the one warning line.
        let o = agent(
            who,
            &home,
            &home,
            &format!(
                "env --quiet --isolation off --profile shell --workspace '{}' \
                 --allow-broad-workspace",
                home.display()
            ),
        );
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {e}");
        assert!(text(&o.stdout).contains("SANDBOX_LANDLOCK"), "{who:?}");
        assert_eq!(e.lines().count(), 1, "{who:?}: {e}");
        assert!(
            e.contains("allowed by --allow-broad-workspace"),
            "{who:?}: {e}"
        );
    }
}

#[test]
fn a_read_only_profile_keeps_working_from_the_home_directory() {
    for who in BOTH {
        let h = Home::new();
        let home = h.path("");
        let o = agent(who, &home, &home, "run --allow-root -- /bin/cat .bashrc");
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{who:?}");
        assert_eq!(text(&o.stdout), "# rc\n", "{who:?}");
    }
}

/// `sandbox exec --json` (or `serve` when `serve`) as `who` with `HOME` the test's home.
fn json_front_end(who: As, home: &Path, serve: bool, input: &str) -> (i32, String, String) {
    let mut c: Command = command(who, SANDBOX);
    if serve {
        c.arg("serve");
    } else {
        c.args(["exec", "--json"]);
    }
    c.env("HOME", home).current_dir("/");
    let o = output_with_input(&mut c, input.as_bytes());
    (
        o.status.code().unwrap_or(-1),
        text(&o.stdout),
        text(&o.stderr),
    )
}

#[test]
fn exec_and_serve_refuse_a_broad_workspace_by_field() {
    for who in BOTH {
        let h = Home::new();
        let home = h.path("");
        let home_s = home.display().to_string();
        let append = ["/bin/bash", "-c", "echo planted >> \"$1\"", "x"];
        let target = h.path(".bashrc").display().to_string();
        let argv: Vec<&str> = append.iter().copied().chain([target.as_str()]).collect();
        for serve in [false, true] {
            let cases = [
                (
                    json!({"argv": argv, "profile": "shell", "cwd": home_s}),
                    "workspace",
                    "the working directory",
                ),
                (
                    json!({"argv": argv, "profile": "shell", "cwd": "/"}),
                    "workspace",
                    "the root directory",
                ),
                (
                    json!({"argv": argv, "profile": "shell", "workspace": home_s}),
                    "workspace",
                    "allow_broad_workspace to true",
                ),
                (
                    json!({"argv": argv, "profile": "shell", "cwd": home_s, "allow_broad_workspace": true}),
                    "allow_broad_workspace",
                    "named workspace only",
                ),
                (
                    json!({"argv": argv, "profile": "shell", "workspace": home_s, "allow_broad_workspace": "yes"}),
                    "allow_broad_workspace",
                    "true or false",
                ),
                (
                    json!({"argv": argv, "profile": "shell", "workspace": home_s, "allow_broad_workspace": 1}),
                    "allow_broad_workspace",
                    "true or false",
                ),
                (
                    // null counts as absent, as for every field.
                    json!({"argv": argv, "profile": "shell", "workspace": home_s, "allow_broad_workspace": null}),
                    "workspace",
                    "allow_broad_workspace to true",
                ),
            ];
            for (req, field, says) in cases {
                let mut req = req;
                if serve {
                    req["id"] = json!("r");
                }
                let (status, out, err) = json_front_end(who, &home, serve, &req.to_string());
                let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
                assert_eq!(
                    v["error"]["field"],
                    json!(field),
                    "{who:?} {req}: {out} {err}"
                );
                let reason = v["error"]["reason"].as_str().unwrap_or_default();
                assert!(reason.contains(says), "{who:?} {req}: {reason}");
                if !serve {
                    assert_eq!(status, 125, "{who:?} {req}");
                }
                assert_eq!(h.bashrc(), "# rc\n", "{who:?} {req}: written");
            }
            // Control and the allowed case: named and allowed, the write lands and
            // `warnings` says so.
            let mut req = json!({"argv": argv, "profile": "shell", "workspace": home_s,
                                 "allow_broad_workspace": true});
            if serve {
                req["id"] = json!("r");
            }
            let (status, out, err) = json_front_end(who, &home, serve, &req.to_string());
            let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
            assert_eq!(status, 0, "{who:?}: {out} {err}");
            assert_eq!(v["exit_code"], json!(0), "{who:?}: {v}");
            let warned = v["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .any(|w| w.contains("allowed by allow_broad_workspace"));
            assert!(warned, "{who:?}: {v}");
            assert!(h.bashrc().contains("planted"), "{who:?} serve={serve}");
            std::fs::write(h.path(".bashrc"), "# rc\n").unwrap();
        }
    }
}

#[test]
fn the_library_refuses_the_root_directory_as_default_workspace() {
    use sandbox_host::exec::{ExecError, Request};
    // `/` does not depend on this process's HOME.
    let r = Request::builder(["/bin/true"])
        .profile("shell")
        .cwd("/")
        .run();
    match r {
        Err(ExecError::Refused(r)) => {
            assert_eq!(r.field, "workspace");
            assert!(r.reason.contains("the root directory"), "{}", r.reason);
        }
        other => panic!("not refused: {other:?}"),
    }
    // Control: from a project directory it runs.
    let dir = tempfile::tempdir().unwrap();
    let r = Request::builder(["/bin/true"])
        .profile("shell")
        .cwd(dir.path().display().to_string())
        .run()
        .unwrap();
    assert_eq!(r.exit_code, Some(0));
}

/// A service account's `HOME=/tmp` (world-writable, sticky: no home of its own to protect) does
/// not make `/tmp` a broad workspace: the documented request runs there, node included.
/// Control: a home of the user's own as the working directory is refused.
#[test]
fn a_shared_temporary_home_is_no_broad_workspace() {
    for who in BOTH {
        let req = json!({"argv": ["/usr/bin/node", "-e", "console.log(42)"], "profile": "shell",
            "timeout_s": 30});
        let o = output_with_input(
            command(who, SANDBOX)
                .args(["exec", "--json"])
                .env("HOME", "/tmp")
                .current_dir("/tmp"),
            req.to_string().as_bytes(),
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["stdout"], "42\n", "{who:?}: {v}");
        let own = tempfile::Builder::new()
            .prefix("ws-home")
            .tempdir_in("/var/tmp")
            .unwrap();
        std::fs::set_permissions(own.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(own.path(), Some(65534), Some(65534)).unwrap();
        }
        let o = output_with_input(
            command(who, SANDBOX)
                .args(["exec", "--json"])
                .env("HOME", own.path())
                .current_dir(own.path()),
            req.to_string().as_bytes(),
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["error"]["field"], "workspace", "{who:?} control: {v}");
    }
}

/// `HOME=/tmp` as uid 65534 with the working directory `/tmp/x`, for both kinds of `/tmp`: the
/// shared one (world-writable, sticky) is no home, and a private one (mode 0700, the user's
/// own, as in a container or CI runner that gives the user its own `/tmp`) is a home, whose
/// start-up files the user's own shells read. In both, `/tmp/x` is a workspace like any
/// project directory below a home, and node writes there; `/tmp` itself is refused as the
/// home only where it is private (control: the shared one runs the same request).
#[test]
fn a_private_tmp_as_home_is_a_home_and_a_shared_one_is_not() {
    let req = json!({"argv": ["/usr/bin/node", "-e",
        "require('fs').writeFileSync('f', '1'); console.log(42)"],
        "profile": "shell", "timeout_s": 30,
        // node reserves more address space than the default limit allows where the limit is
        // RLIMIT_AS (no memory cgroup for uid 65534).
        "limits": {"memory_bytes": 16u64 << 30}});
    for private in [false, true] {
        for cwd in ["/tmp/x", "/tmp"] {
            // A mount namespace of the test's own, with a fresh `/tmp` of either kind (the
            // host's `/tmp` is left alone).
            let mount = if private {
                "mount -t tmpfs -o mode=0700,uid=65534,gid=65534 none /tmp && "
            } else {
                "mount -t tmpfs -o mode=1777 none /tmp && "
            };
            let script = format!(
                "{mount}setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c \
                 'mkdir -p /tmp/x && cd {cwd} && exec \"$0\" exec --json' {SANDBOX}"
            );
            let o = output_with_input(
                Command::new("unshare")
                    .args(["-m", "--propagation", "private", "sh", "-c", &script])
                    .env_clear()
                    .env("PATH", common::PATH)
                    .env("LANG", "C.UTF-8")
                    .env("HOME", "/tmp"),
                req.to_string().as_bytes(),
            );
            let v: Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{private} {cwd}: {e}: {o:?}"));
            if private && cwd == "/tmp" {
                assert_eq!(v["error"]["field"], "workspace", "{v}");
                let reason = v["error"]["reason"].as_str().unwrap();
                assert!(
                    reason.contains("`/tmp` (the default workspace) is the caller's home"),
                    "{reason}"
                );
            } else {
                assert_eq!(v["stdout"], "42\n", "private {private}, {cwd}: {v}");
                assert_eq!(v["exit_code"], 0, "private {private}, {cwd}: {v}");
            }
        }
    }
}
