//! What the preload route (`eval "$(sandbox env)"`) promises beyond its filter and Landlock
//! layer: the library its commands load lies outside every place they may write, System V
//! IPC of other processes is out of reach, and the first `sandbox env` of a user says once
//! what the route cannot stop. Each protection has a control showing the attack works
//! without it. Root and uid 65534.

mod common;

use common::{As, BOTH, PATH, SANDBOX};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A directory everyone may enter, with a workspace everyone may write.
struct World {
    dir: tempfile::TempDir,
    ws: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o777)).unwrap();
    World { dir, ws }
}

impl World {
    /// A directory of the world owned by `who`, with `mode`.
    fn own_dir(&self, path: &Path, who: As, mode: u32) -> PathBuf {
        std::fs::create_dir_all(path).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(path, Some(common::NOBODY), Some(common::NOBODY)).unwrap();
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.to_path_buf()
    }
}

/// `sandbox` as `who` in `cwd` with the bare environment and `vars` added.
fn sandbox(who: As, cwd: &Path, vars: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut c = common::sandbox(who);
    c.current_dir(cwd).args(args);
    for (k, v) in vars {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// `sandbox env --json --quiet` with `args`: the variables.
fn env_vars(
    who: As,
    cwd: &Path,
    vars: &[(&str, &Path)],
    args: &[&str],
) -> BTreeMap<String, String> {
    let mut all = vec!["env", "--json", "--quiet", "--allow-root"];
    all.extend_from_slice(args);
    let o = sandbox(who, cwd, vars, &all);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// `argv` run as `who` in `cwd` with the printed `vars`, as a command of an agent that
/// evaluated them (for uid 65534, `env` sets LD_PRELOAD for the program alone: setpriv
/// itself must not load the library).
fn run(who: As, cwd: &Path, vars: &BTreeMap<String, String>, argv: &[&str]) -> Output {
    let mut vars = vars.clone();
    let mut c = match who {
        As::Root => {
            let mut c = Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
            c.arg("/usr/bin/env");
            if let Some(p) = vars.remove("LD_PRELOAD") {
                c.arg(format!("LD_PRELOAD={p}"));
            }
            c.args(argv);
            c
        }
    };
    c.env_clear()
        .env("PATH", PATH)
        .env("LANG", "C.UTF-8")
        .env(
            "HOME",
            if who == As::Root {
                "/root"
            } else {
                "/nonexistent"
            },
        )
        .envs(&vars)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{:?} stdout {} stderr {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Replaces the file at argv[1] the ways a command of the same user could: make it writable
/// and rewrite it, else remove it and create another at its name. Prints `changed` or
/// `refused <errno>`.
const REPLACE: &str = r#"
import os, sys
p = sys.argv[1]
try:
    os.chmod(p, 0o644)
except OSError:
    pass
try:
    with open(p, "r+b") as f:
        f.write(b"\x7fELF-not-the-library")
    print("changed")
except OSError:
    try:
        os.unlink(p)
        with open(p, "wb") as f:
            f.write(b"\x7fELF-not-the-library")
        print("changed")
    except OSError as e:
        print("refused", e.errno)
"#;

/// A placement case: its name, the variables `sandbox env` runs with, its extra arguments.
type Case<'a> = (&'a str, Vec<(&'a str, &'a Path)>, Vec<String>);

/// The default directory inside the workspace (the cache or the runtime directory pointed
/// into it; for root also HOME as an allowed broad workspace): the library goes elsewhere and
/// a confined command cannot change it. Control: the library at the default place, which
/// `sandbox extract` still uses, is changed by the same command under the same variables.
#[test]
fn the_library_lies_outside_a_workspace_that_holds_its_default_directory() {
    for who in BOTH {
        let w = world();
        let tmp = w.own_dir(&w.dir.path().join("tmp"), As::Root, 0o1777);
        let home = w.own_dir(&w.ws.join("home"), who, 0o755);
        let cache = w.ws.join(".cache");
        let runtime = w.own_dir(&w.ws.join("run"), who, 0o700);
        let mut cases: Vec<Case> = vec![
            (
                "XDG_CACHE_HOME in the workspace",
                vec![("XDG_CACHE_HOME", &cache), ("TMPDIR", &tmp)],
                vec![],
            ),
            // The runtime directory holds credentials (containers/auth.json): such a
            // workspace is refused unless allowed.
            (
                "XDG_RUNTIME_DIR in the workspace",
                vec![("XDG_RUNTIME_DIR", &runtime), ("TMPDIR", &tmp)],
                vec![
                    "--workspace".into(),
                    w.ws.display().to_string(),
                    "--allow-broad-workspace".into(),
                ],
            ),
        ];
        if who == As::Root {
            cases.push((
                "HOME as an allowed broad workspace",
                vec![("HOME", &home), ("TMPDIR", &tmp)],
                vec![
                    "--workspace".into(),
                    home.display().to_string(),
                    "--allow-broad-workspace".into(),
                ],
            ));
        }
        for (case, vars, extra) in &cases {
            let mut args = vec!["--profile", "shell"];
            args.extend(extra.iter().map(String::as_str));
            let printed = env_vars(who, &w.ws, vars, &args);
            let lib = PathBuf::from(&printed["LD_PRELOAD"]);
            assert!(!lib.starts_with(&w.ws), "{who:?} {case}: {lib:?}");
            let before = std::fs::read(&lib).unwrap();
            let o = run(
                who,
                &w.ws,
                &printed,
                &["python3", "-c", REPLACE, &printed["LD_PRELOAD"]],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.starts_with("refused"), "{who:?} {case}: {}", text(&o));
            assert_eq!(std::fs::read(&lib).unwrap(), before, "{who:?} {case}");
            // A later command loads it and is confined: writing outside the workspace fails.
            let open = w.own_dir(&w.dir.path().join("open"), As::Root, 0o777);
            let outside = open.join(format!("outside-{who:?}"));
            let o = run(who, &w.ws, &printed, &["touch", outside.to_str().unwrap()]);
            assert!(
                !o.status.success() && !outside.exists(),
                "{who:?} {case}: {}",
                text(&o)
            );

            // Control: the default place, where the library used to go.
            let o = sandbox(who, &w.ws, vars, &["extract"]);
            assert!(o.status.success(), "{}", text(&o));
            let old = String::from_utf8_lossy(&o.stdout).trim().to_string();
            assert!(Path::new(&old).starts_with(&w.ws), "{who:?} {case}: {old}");
            let o = run(who, &w.ws, &printed, &["python3", "-c", REPLACE, &old]);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                "changed",
                "{who:?} {case}: {}",
                text(&o)
            );
            assert_ne!(std::fs::read(&old).unwrap(), before, "{who:?} {case}");
        }
    }
}

/// When every directory the library could go to lies in a writable place, or the library
/// the operator named does, `sandbox env` prints nothing to evaluate and one line naming the
/// flag; the same places without the flag are accepted (the control).
#[test]
fn a_library_that_cannot_be_kept_outside_is_refused_naming_the_flag() {
    let w = world();
    let tmp = w.own_dir(&w.dir.path().join("tmp"), As::Root, 0o1777);
    let home = w.own_dir(&w.dir.path().join("home"), As::Root, 0o755);
    let vars = [("HOME", home.as_path()), ("TMPDIR", tmp.as_path())];
    let o = sandbox(
        As::Root,
        &w.ws,
        &vars,
        &[
            "env",
            "--allow-root",
            "--quiet",
            "--profile",
            "write",
            "--workspace",
            "/",
            "--allow-broad-workspace",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert_eq!(
        err.lines().count(),
        1,
        "the refusal alone (no warning for a run that does not happen): {err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with(
            "sandbox: --workspace: / holds every directory the preload library could go to"
        )),
        "{err}"
    );

    // An operator-given library in an --allow-write path.
    let libdir = w.own_dir(&w.dir.path().join("lib"), As::Root, 0o755);
    let lib = libdir.join("libsandbox.so");
    let o = sandbox(
        As::Root,
        &w.ws,
        &vars,
        &["extract", "--to", lib.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let config = w.dir.path().join("config.json");
    std::fs::write(
        &config,
        serde_json::json!({"tools": {"exec": {"sandbox": {"libsandboxPath": lib, "profile": "write"}}}})
            .to_string(),
    )
    .unwrap();
    // `--isolation off`: the route's every-call line on what it cannot put back is not what
    // this test is about.
    let base = [
        "env",
        "--allow-root",
        "--quiet",
        "--isolation",
        "off",
        "--config",
        config.to_str().unwrap(),
    ];
    let mut args = base.to_vec();
    args.extend(["--allow-write", libdir.to_str().unwrap()]);
    let o = sandbox(As::Root, &w.ws, &vars, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(
        o.stdout.is_empty() && err.lines().count() == 1,
        "{}",
        text(&o)
    );
    assert!(
        err.starts_with("sandbox: --allow-write: the preload library "),
        "{err}"
    );
    assert!(err.contains("libsandboxPath"), "{err}");
    // Control: the same library without the flag.
    let o = sandbox(As::Root, &w.ws, &vars, &base);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(lib.to_str().unwrap()));
}

/// A C program that creates a System V segment (`create KEY`: prints its id), reads one by
/// key and by id (`attach KEY ID`: `key:...` and `id:...`, each `read=TEXT` or `errno=N`), or
/// removes one (`remove ID`).
const SHM_C: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

static void show(const char *how, int id) {
    if (id < 0) { printf("%s:errno=%d ", how, errno); return; }
    char *p = shmat(id, 0, SHM_RDONLY);
    if (p == (void *)-1) { printf("%s:errno=%d ", how, errno); return; }
    printf("%s:read=%s ", how, p);
    shmdt(p);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "create")) {
        int id = shmget((key_t)strtol(argv[2], 0, 0), 4096, IPC_CREAT | IPC_EXCL | 0600);
        if (id < 0) { perror("shmget"); return 1; }
        char *p = shmat(id, 0, 0);
        if (p == (void *)-1) { perror("shmat"); return 1; }
        strcpy(p, "SEGMENT-SECRET");
        shmdt(p);
        printf("%d\n", id);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "remove"))
        return shmctl(atoi(argv[2]), IPC_RMID, 0) ? 1 : 0;
    if (argc == 4 && !strcmp(argv[1], "attach")) {
        errno = 0;
        show("key", shmget((key_t)strtol(argv[2], 0, 0), 0, 0));
        errno = 0;
        show("id", atoi(argv[3]));
        printf("\n");
        return 0;
    }
    return 2;
}
"#;

/// A segment made outside with a known key is unreachable from a preload-route command, by
/// key and by id (ENOSYS). Controls: the same program reads it without the preload, and with
/// the route's variables minus the refusal (what `no-exec` printed before); `sandbox run`
/// hides it with the IPC namespace, and reads it with `--isolation off`.
#[test]
fn system_v_segments_of_other_processes_are_out_of_reach() {
    let w = world();
    let src = w.dir.path().join("shm.c");
    let prog = w.dir.path().join("shm");
    std::fs::write(&src, SHM_C).unwrap();
    let o = Command::new("gcc")
        .arg("-o")
        .arg(&prog)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let prog_s = prog.to_str().unwrap();
    for (i, who) in BOTH.into_iter().enumerate() {
        let key = format!(
            "{:#x}",
            0x5a00_0000 | ((std::process::id() & 0xfff) << 4) | i as u32
        );
        let o = common::command(who, &prog)
            .args(["create", &key])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let attach = ["attach", key.as_str(), id.as_str()];
        let read = "key:read=SEGMENT-SECRET id:read=SEGMENT-SECRET";

        // Control: unconfined, both ways read it.
        let o = common::command(who, &prog).args(attach).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), read, "{who:?}");

        for profile in ["no-exec", "shell"] {
            let vars = env_vars(who, &w.ws, &[], &["--profile", profile]);
            let mut argv = vec![prog_s];
            argv.extend(attach);
            let o = run(who, &w.ws, &vars, &argv);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                format!("key:errno={0} id:errno={0}", libc::ENOSYS),
                "{who:?} {profile}: {}",
                text(&o)
            );
        }
        // Control: no-exec's variables without the refusal reach it (the finding).
        let mut vars = env_vars(who, &w.ws, &[], &["--profile", "no-exec"]);
        let deny = vars.get_mut("SECCOMP_SYSCALL_DENY").unwrap();
        *deny = deny
            .split(':')
            .filter(|e| !e.ends_with("=ENOSYS") || e.starts_with("clone3"))
            .collect::<Vec<_>>()
            .join(":");
        let mut argv = vec![prog_s];
        argv.extend(attach);
        let o = run(who, &w.ws, &vars, &argv);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            read,
            "{who:?}: {}",
            text(&o)
        );

        // sandbox run: the IPC namespace has no such key or id; without namespaces it reads.
        let o = sandbox(
            who,
            &w.ws,
            &[],
            &[
                "run",
                "--allow-root",
                "--profile",
                "no-exec",
                "--",
                prog_s,
                attach[0],
                attach[1],
                attach[2],
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            format!("key:errno={} id:errno={}", libc::ENOENT, libc::EINVAL),
            "{who:?}: {}",
            text(&o)
        );
        let o = sandbox(
            who,
            &w.ws,
            &[],
            &[
                "run",
                "--allow-root",
                "--isolation",
                "off",
                "--profile",
                "no-exec",
                "--",
                prog_s,
                attach[0],
                attach[1],
                attach[2],
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            read,
            "{who:?}: {}",
            text(&o)
        );

        let o = common::command(who, &prog)
            .args(["remove", &id])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
}

/// The note on what the route cannot stop: on stderr the first time for each user, alone,
/// not the second time, never with --quiet (which does not use it up); `--help` says it too.
/// Each user gets a state directory of its own here: uid 65534 in a fresh TMPDIR, root in a
/// private mount namespace with a tmpfs on /run.
#[test]
fn the_note_is_printed_once_per_user_and_not_with_quiet() {
    let note = "sandbox: note: the preload route does not confine code that runs before its \
                constructor";
    let w = world();
    let tmp = w.own_dir(&w.dir.path().join("tmp"), As::Root, 0o1777);
    // Each line of the script's output: the stderr of one `sandbox env`, or `-` when empty.
    let script = r#"
        [ "$(id -u)" != 0 ] || mount -t tmpfs -o mode=755 none /run || exit 99
        for q in --quiet "" ""; do
            e=$("$0" env --allow-root --profile write --isolation off $q 2>&1 >/dev/null)
            echo "${e:--}"
        done
    "#;
    for who in BOTH {
        let mut c = match who {
            As::Root => {
                let mut c = common::command(who, "unshare");
                c.args([
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    script,
                    SANDBOX,
                ]);
                c
            }
            As::Nobody => {
                let mut c = common::command(who, "sh");
                c.args(["-c", script, SANDBOX]);
                c
            }
        };
        let o = c.current_dir(&w.ws).env("TMPDIR", &tmp).output().unwrap();
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{who:?}: {out}");
        assert_eq!(lines[0], "-", "{who:?}: --quiet prints nothing");
        assert!(lines[1].starts_with(note), "{who:?}: the first time: {out}");
        assert!(
            lines[1].contains("sandbox run and sandbox exec do"),
            "{out}"
        );
        assert_eq!(lines[2], "-", "{who:?}: the second time: {out}");
    }
    let o = common::sandbox(As::Root)
        .args(["env", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("What the preload route cannot stop"),
        "{help}"
    );
    assert!(help.contains("--quiet"), "{help}");
}

/// `sandbox run` with a custom profile whose outer filter is not exact loads the library in
/// each job: a job whose workspace holds it is refused, naming `--workspace`. Controls: the
/// same run with the library outside the workspace runs; a `shell` job in that workspace
/// changes the library there (the place is writable to a job).
#[test]
fn a_run_that_would_load_a_library_in_its_workspace_is_refused() {
    // Without the loader's calls: the outer filter exempts them and the preload stacks the
    // exact filter.
    let allow = "read:write:close:exit_group:exit:fstat:newfstatat:brk:mmap:munmap:\
                 rt_sigaction:rt_sigprocmask:mprotect";
    for who in BOTH {
        let w = world();
        let cache = w.ws.join(".cache");
        let ws = w.ws.to_str().unwrap();
        let args = [
            "run",
            "--allow-root",
            "--allow",
            allow,
            "--workspace",
            ws,
            "--",
            "/bin/echo",
            "hi",
        ];
        let o = sandbox(who, &w.ws, &[("XDG_CACHE_HOME", &cache)], &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{who:?}: {}", text(&o));
        assert!(
            err.lines().any(|l| l.starts_with(&format!(
                "sandbox: --workspace: {ws} holds the preload library {ws}/.cache/sandbox/"
            ))),
            "{who:?}: {err}"
        );
        // The same without namespaces.
        let mut off = args.to_vec();
        off.splice(1..1, ["--isolation", "off"]);
        let o = sandbox(who, &w.ws, &[("XDG_CACHE_HOME", &cache)], &off);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {}", text(&o));
        // Control: the library outside the workspace. Without namespaces: this test's
        // directories are under /tmp, which a namespaced job sees as its own empty tmpfs.
        let elsewhere = w.own_dir(&w.dir.path().join("cache"), who, 0o700);
        let o = sandbox(who, &w.ws, &[("XDG_CACHE_HOME", &elsewhere)], &off);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "hi\n",
            "{who:?}: {}",
            text(&o)
        );
        // Control: a job may change what lies in its workspace, the library there included.
        let o = sandbox(who, &w.ws, &[("XDG_CACHE_HOME", &cache)], &["extract"]);
        let lib = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(lib.starts_with(ws), "{who:?}: {}", text(&o));
        let o = sandbox(
            who,
            &w.ws,
            &[],
            &[
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--workspace",
                ws,
                "--",
                "python3",
                "-c",
                REPLACE,
                &lib,
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "changed",
            "{who:?}: {}",
            text(&o)
        );
    }
}
