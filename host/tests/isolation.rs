//! The namespace layer through `sandbox run` and `sandbox exec --json`, as root and as uid
//! 65534: each attack on the outside (reading another process's environment, listing and
//! signalling processes, leaving files in /tmp, planting a git hook) beside a control that
//! shows it works with `--isolation off`. The Landlock layer is off in these runs (and the
//! filter too, with `unrestricted`), so that the namespaces alone are what stops them.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

mod common;

use common::{command, output_with_input, As, BOTH, PATH, SANDBOX};

/// `sandbox run ARGS` as `who` in `cwd`, with Landlock off unless ARGS say otherwise.
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    let mut c = command(who, SANDBOX);
    c.arg("run").arg("--allow-root");
    if !args.contains(&"--landlock") {
        c.args(["--landlock", "off"]);
    }
    c.args(args).current_dir(cwd).output().expect("sandbox run")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A world-writable workspace (uid 65534 can use it too), removed on drop.
fn workspace() -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix("iso-ws").tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
    d
}

fn chmod_r(p: &Path) {
    let st = Command::new("chmod")
        .arg("-R")
        .arg("a+rwX")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A process outside the sandbox with a secret in its environment, run as `who`.
fn outside_sleeper(who: As) -> Child {
    command(who, "/bin/sleep")
        .arg("300")
        .env("SECRET_TOKEN", "tok-4711")
        .spawn()
        .unwrap()
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn another_process_environment_is_out_of_reach() {
    for who in BOTH {
        let ws = workspace();
        let sleeper = Killed(outside_sleeper(who));
        let environ = format!("/proc/{}/environ", sleeper.0.id());
        let args = [
            "--profile",
            "unrestricted",
            "--",
            "/bin/cat",
            environ.as_str(),
        ];
        let (out, _) = text(&run(who, ws.path(), &args));
        assert!(!out.contains("tok-4711"), "{who:?}: {out}");
        // Control: without namespaces the same command prints the secret.
        let mut off = vec!["--isolation", "off"];
        off.extend(args);
        let (out, err) = text(&run(who, ws.path(), &off));
        assert!(
            out.contains("SECRET_TOKEN=tok-4711"),
            "{who:?}: {out} {err}"
        );
    }
}

#[test]
fn only_the_sandboxed_tree_is_listed_and_pid_1_is_the_init() {
    for who in BOTH {
        let ws = workspace();
        let sleeper = Killed(outside_sleeper(who));
        let pid = sleeper.0.id().to_string();
        let script =
            "ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; cat /proc/1/comm; echo $$";
        let args = ["--profile", "unrestricted", "--", "/bin/sh", "-c", script];
        let (out, err) = text(&run(who, ws.path(), &args));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{who:?}: {out} {err}");
        let pids: Vec<&str> = lines[0].split_whitespace().collect();
        assert!(!pids.contains(&pid.as_str()), "{who:?}: {out}");
        assert!(pids.len() <= 6 && pids.contains(&"1"), "{who:?}: {out}");
        assert_eq!(lines[2], "2", "the command is the init's child: {out}");
        // Control: without namespaces the outside process is listed.
        let mut off = vec!["--isolation", "off"];
        off.extend(args);
        let (out, _) = text(&run(who, ws.path(), &off));
        assert!(
            out.lines()
                .next()
                .unwrap()
                .split_whitespace()
                .any(|p| p == pid),
            "{out}"
        );
    }
}

#[test]
fn an_outside_process_cannot_be_signalled() {
    for who in BOTH {
        let ws = workspace();
        let mut sleeper = Killed(outside_sleeper(who));
        let pid = sleeper.0.id().to_string();
        let args = [
            "--profile",
            "unrestricted",
            "--",
            "/bin/kill",
            "-TERM",
            pid.as_str(),
        ];
        let o = run(who, ws.path(), &args);
        assert_ne!(o.status.code(), Some(0), "{who:?}: {:?}", text(&o));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            sleeper.0.try_wait().unwrap().is_none(),
            "{who:?}: the sleeper died"
        );
        // Control: without namespaces the signal arrives.
        let mut off = vec!["--isolation", "off"];
        off.extend(args);
        let o = run(who, ws.path(), &off);
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
        let st = sleeper.0.wait().unwrap();
        assert!(!st.success());
    }
}

#[test]
fn tmp_written_inside_is_not_visible_outside() {
    for who in BOTH {
        let ws = workspace();
        let marker = format!("/tmp/iso-marker-{}-{who:?}", std::process::id());
        let script = format!("echo x > {marker} && cat {marker} && echo \"$TMPDIR\"");
        let args = [
            "--profile",
            "unrestricted",
            "--",
            "/bin/sh",
            "-c",
            script.as_str(),
        ];
        let (out, err) = text(&run(who, ws.path(), &args));
        assert_eq!(out, "x\n/tmp\n", "{who:?}: {err}");
        assert!(!Path::new(&marker).exists(), "{who:?}: {marker} leaked");
        // Control: without namespaces the file stays behind.
        let mut off = vec!["--isolation", "off"];
        off.extend(args);
        let (out, _) = text(&run(who, ws.path(), &off));
        assert!(out.starts_with("x\n"));
        assert!(Path::new(&marker).exists());
        fs::remove_file(&marker).unwrap();
    }
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// Writes a hook, a command key into the repository config and a normal file; prints what
/// worked.
const PLANT: &str = "for f in \"$HOOKS/pre-commit\" \"$GITDIR/config\" file.txt; do \
    if printf '[core]\\n\\tfsmonitor = evil\\n' >> \"$f\" 2>/dev/null; then echo \"wrote $f\"; \
    else echo \"refused $f\"; fi; done";

fn plant(who: As, cwd: &Path, gitdir: &Path, extra: &[&str]) -> String {
    plant_output(who, cwd, gitdir, extra).0
}

/// [`plant`]'s stdout and stderr.
fn plant_output(who: As, cwd: &Path, gitdir: &Path, extra: &[&str]) -> (String, String) {
    let script = PLANT
        .replace("$HOOKS", &gitdir.join("hooks").display().to_string())
        .replace("$GITDIR", &gitdir.display().to_string());
    let mut args = extra.to_vec();
    args.extend([
        "--profile",
        "unrestricted",
        "--",
        "/bin/sh",
        "-c",
        script.as_str(),
    ]);
    text(&run(who, cwd, &args))
}

/// Hooks are read-only during the job; the config is writable (git renames `config.lock`
/// over it), and a key that runs a command does not survive the job (module `git_guard`;
/// tests/git_guard.rs has the rest).
#[test]
fn git_hooks_are_read_only_and_config_keys_that_run_code_do_not_survive() {
    for who in BOTH {
        let ws = workspace();
        git(ws.path(), &["init", "-q"]);
        fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        chmod_r(ws.path());
        let gitdir = ws.path().join(".git");
        let (out, err) = plant_output(who, ws.path(), &gitdir, &[]);
        assert!(
            out.contains("refused") && out.contains("wrote file.txt"),
            "{who:?}: {out}"
        );
        assert_eq!(out.matches("refused").count(), 1, "{who:?}: {out}");
        assert!(
            out.contains("wrote") && out.contains(".git/config"),
            "{who:?}: {out}"
        );
        assert!(!gitdir.join("hooks/pre-commit").exists());
        let config = fs::read_to_string(gitdir.join("config")).unwrap();
        assert!(!config.contains("fsmonitor"), "{who:?}: {config}");
        assert!(
            err.contains("sandbox: removed core.fsmonitor that the command set in .git/config"),
            "{who:?}: {err}"
        );
        // `.git` itself cannot be moved aside and replaced.
        let (out, _) = text(&run(
            who,
            ws.path(),
            &[
                "--profile",
                "unrestricted",
                "--",
                "/bin/sh",
                "-c",
                "mv .git .git-old && echo moved",
            ],
        ));
        assert_eq!(out, "", "{who:?}");
        // Control: without namespaces the hook is planted.
        let out = plant(who, ws.path(), &gitdir, &["--isolation", "off"]);
        assert!(!out.contains("refused"), "{who:?}: {out}");
        assert!(gitdir.join("hooks/pre-commit").exists());
        let config = fs::read_to_string(gitdir.join("config")).unwrap();
        assert!(config.contains("fsmonitor"), "{who:?}: {config}");
    }
}

#[test]
fn a_worktree_protects_the_hooks_its_gitdir_file_points_to() {
    for who in BOTH {
        let root = workspace();
        let main = root.path().join("main");
        fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q"]);
        git(
            &main,
            &[
                "-c",
                "user.email=a@b",
                "-c",
                "user.name=a",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        );
        git(&main, &["worktree", "add", "-q", "../wt"]);
        let wt = root.path().join("wt");
        assert!(wt.join(".git").is_file());
        chmod_r(root.path());
        let common = main.join(".git");
        // The common config is outside the workspace (`wt`): read-only in the view.
        let out = plant(who, &wt, &common, &[]);
        assert_eq!(out.matches("refused").count(), 2, "{who:?}: {out}");
        assert!(out.contains("wrote file.txt"), "{who:?}: {out}");
        // The gitdir: file cannot be pointed elsewhere either.
        let (out, _) = text(&run(
            who,
            &wt,
            &[
                "--profile",
                "unrestricted",
                "--",
                "/bin/sh",
                "-c",
                "echo 'gitdir: /tmp' > .git && echo wrote",
            ],
        ));
        assert_eq!(out, "", "{who:?}");
        let out = plant(who, &wt, &common, &["--isolation", "off"]);
        assert!(!out.contains("refused"), "{who:?}: {out}");
    }
}

#[test]
fn a_protected_path_that_does_not_exist_cannot_be_created() {
    for who in BOTH {
        let ws = workspace();
        let target = ws.path().join("deploy/secrets.env");
        let ro = target.display().to_string();
        let script = "mkdir -p deploy && echo x > deploy/secrets.env && echo created";
        let args = [
            "--read-only",
            ro.as_str(),
            "--profile",
            "unrestricted",
            "--",
            "/bin/sh",
            "-c",
            script,
        ];
        let (out, _) = text(&run(who, ws.path(), &args));
        assert_eq!(out, "", "{who:?}");
        // The placeholder is gone afterwards.
        assert!(!ws.path().join("deploy").exists(), "{who:?}");
        // A missing file in an existing directory: an empty placeholder file covers it.
        fs::create_dir(ws.path().join("deploy")).unwrap();
        chmod_r(ws.path());
        let (out, _) = text(&run(who, ws.path(), &args));
        assert_eq!(out, "", "{who:?}");
        assert!(!target.exists(), "{who:?}");
        // Control: without the option the file is created.
        let (out, _) = text(&run(who, ws.path(), &args[2..]));
        assert_eq!(out, "created\n");
        assert!(target.exists());
        fs::remove_dir_all(ws.path().join("deploy")).unwrap();
    }
}

/// Processes whose command line contains `tag`: (pid, command line).
fn tagged(tag: &str) -> Vec<(i32, String)> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let cmd = fs::read_to_string(e.path().join("cmdline")).ok()?;
            cmd.contains(tag).then_some((pid, cmd))
        })
        .collect()
}

/// Two ways out of the command's process group (a new session, a double fork), both outliving
/// the command. Here two layers end them: the init (PID 1 of the namespace; when the command
/// ends it exits, and the kernel kills everything left in the namespace) and the request's
/// cgroup or process-tree kill, which runs with `--isolation off` too, so `--isolation off` is
/// no control for the init. The init alone is shown by the spawn-level test
/// `orphans_end_with_the_init_and_outlive_a_plain_spawn` (host/src/exec/spawn/init.rs): the
/// same orphan without containment dies with the init and survives a plain spawn. The control
/// here shows the attack itself: outside the sandbox the orphans survive.
#[test]
fn orphans_are_gone_when_the_command_ends() {
    for who in BOTH {
        let ws = workspace();
        let tag = format!("31{}", std::process::id() % 1000);
        let script = format!(
            "setsid sleep {tag}1 </dev/null >/dev/null 2>&1 & (sleep {tag}2 </dev/null >/dev/null 2>&1 &) ; echo started"
        );
        // Also without namespaces, where (as uid 65534 here, or in a container) no cgroup holds
        // the run either: the shell exits at once, and the `setsid sleep` it leaves has been
        // re-parented to the host before the run ends about half the time (it outlived the
        // run then). Eight rounds.
        for (extra, rounds) in [(&[][..], 1), (&["--isolation", "off"][..], 8)] {
            for round in 0..rounds {
                let mut args = vec!["--profile", "unrestricted"];
                args.extend_from_slice(extra);
                args.extend(["--", "/bin/sh", "-c", &script]);
                let o = run(who, ws.path(), &args);
                assert_eq!(text(&o).0, "started\n", "{who:?} {extra:?}");
                let left = tagged(&tag);
                assert!(left.is_empty(), "{who:?} {extra:?} round {round}: {left:?}");
            }
        }
        // Control: the same command outside the sandbox leaves both running.
        let o = command(who, "/bin/sh")
            .args(["-c", &script])
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert_eq!(text(&o).0, "started\n");
        // The background shells may still be on their way to exec `sleep`.
        let sleeps =
            |l: &[(i32, String)]| l.iter().filter(|(_, c)| c.starts_with("sleep\0")).count();
        let mut left = tagged(&tag);
        for _ in 0..500 {
            if sleeps(&left) == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            left = tagged(&tag);
        }
        for (pid, _) in &left {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert_eq!(sleeps(&left), 2, "{who:?}: {left:?}");
    }
}

#[test]
fn static_programs_run_in_the_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("pid.c");
    fs::write(&src, "#include <stdio.h>\n#include <unistd.h>\nint main(void){printf(\"%d\\n\", (int)getpid());return 3;}\n").unwrap();
    let prog = dir.path().join("pid");
    let st = Command::new("gcc")
        .args(["-static", "-o"])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    chmod_r(dir.path());
    let p = prog.display().to_string();
    for who in BOTH {
        let ws = workspace();
        let args = [
            "--static-binary",
            "confine",
            "--profile",
            "minimal",
            "--",
            p.as_str(),
        ];
        let o = run(who, ws.path(), &args);
        assert_eq!(
            (o.status.code(), text(&o).0.as_str()),
            (Some(3), "2\n"),
            "{who:?}: {:?}",
            text(&o)
        );
        let mut off = vec!["--isolation", "off"];
        off.extend(args);
        let o = run(who, ws.path(), &off);
        assert_eq!(o.status.code(), Some(3));
        assert_ne!(text(&o).0, "2\n");
    }
}

#[test]
fn violations_and_exit_statuses_pass_through_the_init() {
    for who in BOTH {
        let ws = workspace();
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "minimal",
                "--on-violation",
                "kill",
                "--",
                "/usr/bin/python3",
                "-c",
                "import socket; socket.socket()",
            ],
        );
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(159), "{who:?}: {err}");
        assert!(err.contains("syscall socket"), "{who:?}: {err}");
        let o = run(who, ws.path(), &["--", "/bin/sh", "-c", "exit 42"]);
        assert_eq!(o.status.code(), Some(42));
    }
}

#[test]
fn the_init_forwards_the_signals_it_gets_to_the_command() {
    use std::io::{BufRead, BufReader};
    let ws = workspace();
    for who in BOTH {
        // The command traps TERM and says so; untrapped, it gives up after about 10 s (3).
        let script = "trap 'echo got-TERM; exit 7' TERM; echo started; \
                      i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 3";
        let mut c = command(who, SANDBOX);
        c.args([
            "run",
            "--allow-root",
            "--landlock",
            "off",
            "--profile",
            "shell",
        ])
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(ws.path())
        .stdout(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "started\n", "{who:?}");
        // The sandbox's only child is the namespaces' init (PID 1 inside).
        let o = Command::new("pgrep")
            .args(["-P", &child.id().to_string()])
            .output()
            .unwrap();
        let init = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(
            !init.is_empty() && !init.contains('\n'),
            "{who:?}: {init:?}"
        );
        let st = Command::new("kill")
            .args(["-TERM", &init])
            .status()
            .unwrap();
        assert!(st.success(), "{who:?}");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            (status.code(), rest.as_str()),
            (Some(7), "got-TERM\n"),
            "{who:?}"
        );
    }
}

#[test]
fn degraded_mode_forced_in_the_host() {
    let ws = workspace();
    let mut c = command(As::Root, SANDBOX);
    c.env("SANDBOX_ISOLATION_UNAVAILABLE", "test")
        .args(["run", "--allow-root", "--", "/bin/true"])
        .current_dir(ws.path());
    let o = c.output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(err.matches("namespaces unavailable").count(), 1, "{err}");
    assert!(err.contains("SANDBOX_ISOLATION_UNAVAILABLE=test"), "{err}");
    // In a command-line user's terms.
    assert!(err.contains("pass --isolation required to refuse"), "{err}");
    // A path asked to be read-only is refused, not left writable (the file is not created).
    let ro = ws.path().display().to_string();
    let mut c = command(As::Root, SANDBOX);
    c.env("SANDBOX_ISOLATION_UNAVAILABLE", "test")
        .args([
            "run",
            "--allow-root",
            "--read-only",
            &ro,
            "--profile",
            "shell",
        ])
        .args(["--", "/bin/sh", "-c", "touch made"])
        .current_dir(ws.path());
    let o = c.output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("--read-only: needs the namespace layer"),
        "{err}"
    );
    assert!(!ws.path().join("made").exists());
    let mut c = command(As::Root, SANDBOX);
    c.env("SANDBOX_ISOLATION_UNAVAILABLE", "test")
        .args([
            "run",
            "--allow-root",
            "--isolation",
            "required",
            "--",
            "/bin/true",
        ])
        .current_dir(ws.path());
    let o = c.output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("isolation") && err.contains("unavailable"),
        "{err}"
    );
    // The same through exec --json: a result with the warning, and a refusal naming the field.
    for (mode, want) in [
        ("preferred", "warnings"),
        ("required", "\"field\":\"isolation\""),
    ] {
        // As root below the isolated tier a request must say allow_root (tests/cli.rs).
        let req =
            format!("{{\"argv\":[\"/bin/true\"],\"isolation\":\"{mode}\",\"allow_root\":true}}");
        let o = output_with_input(
            command(As::Root, SANDBOX)
                .env("SANDBOX_ISOLATION_UNAVAILABLE", "test")
                .args(["exec", "--json"]),
            req.as_bytes(),
        );
        let (out, _) = text(&o);
        assert!(out.contains(want), "{mode}: {out}");
        if mode == "preferred" {
            assert!(out.contains("namespaces unavailable"), "{out}");
        }
    }
}

/// `sandbox ARGS` in a user namespace of its own whose `user.max_user_namespaces` is `limit`
/// (per user namespace): with 0 the kernel refuses every namespace the sandbox creates.
fn in_limited_userns(cwd: &Path, limit: u32, args: &[&str]) -> Output {
    let mut c = command(As::Root, "unshare");
    let script = format!("echo {limit} > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"");
    c.args(["--user", "--map-root-user", "sh", "-c", &script, SANDBOX])
        .args(args)
        .current_dir(cwd);
    c.output().expect("unshare")
}

#[test]
fn namespaces_refused_by_the_kernel_are_found_at_spawn() {
    // No probe runs before the spawn: the spawn's clone3 finds the refusal, and the job is
    // planned again without namespaces (preferred) or refused (required).
    let ws = workspace();
    let pid = ["run", "--allow-root", "--", "sh", "-c", "echo $$"];
    // Control: with a limit that allows them, the program is PID 2 under the init.
    let o = in_limited_userns(ws.path(), 100, &pid);
    let (out, err) = text(&o);
    assert_eq!((o.status.code(), out.trim()), (Some(0), "2"), "{err}");
    let o = in_limited_userns(ws.path(), 0, &pid);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_ne!(out.trim(), "2", "{err}");
    assert_eq!(err.matches("namespaces unavailable").count(), 1, "{err}");
    assert!(err.contains("max_user_namespaces"), "{err}");
    let o = in_limited_userns(
        ws.path(),
        0,
        &[
            "run",
            "--allow-root",
            "--isolation",
            "required",
            "--",
            "/bin/true",
        ],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains("namespaces are required but unavailable"),
        "{err}"
    );
    // A network namespace alone (isolation off, network none) is refused the same way.
    let o = in_limited_userns(
        ws.path(),
        0,
        &[
            "run",
            "--allow-root",
            "--isolation",
            "off",
            "--network",
            "none",
            "--profile",
            "shell",
            "--",
            "/bin/true",
        ],
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(err.contains("network namespace"), "{err}");
}

/// `sandbox MODE` (`exec --json` or `serve`) fed `input`, in a user namespace whose
/// `user.max_user_namespaces` is `limit` (see [`in_limited_userns`]); its stdout.
fn json_in_limited_userns(cwd: &Path, limit: u32, mode: &[&str], input: &str) -> String {
    let mut c = command(As::Root, "unshare");
    let script = format!("echo {limit} > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"");
    c.args(["--user", "--map-root-user", "sh", "-c", &script, SANDBOX])
        .args(mode)
        .current_dir(cwd);
    let o = output_with_input(&mut c, input.as_bytes());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn json_runners_plan_again_when_the_kernel_refuses_namespaces() {
    // The engine's entry point (exec --json, serve, the library) falls back like `sandbox run`:
    // preferred runs without namespaces and says so, required is refused naming the field.
    let ws = workspace();
    let pid = r#""argv":["/bin/sh","-c","echo $$"],"profile":"shell""#;
    for mode in [&["exec", "--json"][..], &["serve"]] {
        // Root in the user namespace, below the isolated tier once refused: allow_root.
        let line = |extra: &str| format!("{{\"id\":\"a\",{pid},\"allow_root\":true{extra}}}\n");
        let req = |extra: &str| match mode[0] {
            "serve" => line(extra),
            _ => line(extra).replacen("\"id\":\"a\",", "", 1),
        };
        // Control: with a limit that allows them, the program is PID 2 under the init.
        let out = json_in_limited_userns(ws.path(), 100, mode, &req(""));
        assert!(out.contains(r#""stdout":"2\n""#), "{mode:?}: {out}");
        let out = json_in_limited_userns(ws.path(), 0, mode, &req(""));
        assert!(out.contains(r#""exit_code":0"#), "{mode:?}: {out}");
        assert!(!out.contains(r#""stdout":"2\n""#), "{mode:?}: {out}");
        assert!(out.contains("namespaces unavailable"), "{mode:?}: {out}");
        let out = json_in_limited_userns(ws.path(), 0, mode, &req(r#","isolation":"required""#));
        assert!(out.contains(r#""field":"isolation""#), "{mode:?}: {out}");
        assert!(out.contains("required but unavailable"), "{mode:?}: {out}");
    }
}

/// `shell` over a read-only workspace is the read-only way to let an agent explore: its
/// programs read, list and run, and change nothing (control: the same script writes without
/// `--read-only`). Without the namespace layer the binds cannot be made, so `--read-only` with
/// `--isolation off` is refused rather than ignored (it was: the file was written).
#[test]
fn a_read_only_workspace_under_shell_changes_nothing() {
    let script = "cat data.txt; ls | wc -l; touch new; echo x >> data.txt; rm data.txt; \
        mkdir d; true";
    for who in BOTH {
        let ws = workspace();
        fs::write(ws.path().join("data.txt"), "original\n").unwrap();
        chmod_r(ws.path());
        let w = ws.path().to_str().unwrap();
        let explore = ["--profile", "shell", "--", "/bin/bash", "-c", script];
        let ro = [&["--read-only", w][..], &explore[..]].concat();
        let (out, err) = text(&run(who, ws.path(), &ro));
        assert_eq!(out, "original\n1\n", "{who:?}: {err}");
        assert_eq!(
            err.matches("Read-only file system").count(),
            4,
            "{who:?}: {err}"
        );
        assert_eq!(
            fs::read_dir(ws.path()).unwrap().count(),
            1,
            "{who:?}: only data.txt"
        );
        assert_eq!(
            fs::read_to_string(ws.path().join("data.txt")).unwrap(),
            "original\n"
        );
        let off = [&["--isolation", "off"][..], &ro[..]].concat();
        let o = run(who, ws.path(), &off);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {out}{err}");
        assert!(
            err.contains("--read-only: needs the namespace layer"),
            "{err}"
        );
        assert!(
            !ws.path().join("new").exists(),
            "{who:?}: refused before running"
        );
        // Control: without `--read-only` the same script changes the workspace.
        let o = run(
            who,
            ws.path(),
            &[&["--isolation", "off"][..], &explore[..]].concat(),
        );
        assert!(o.status.success(), "{who:?}: {}", text(&o).1);
        assert!(ws.path().join("new").exists() && ws.path().join("d").exists());
        assert!(!ws.path().join("data.txt").exists());
    }
    let body = r#"{"argv":["/bin/true"],"isolation":"off","read_only_paths":["/tmp"]}"#;
    let o = output_with_input(
        command(As::Root, SANDBOX).args(["exec", "--json"]),
        body.as_bytes(),
    );
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{out}");
    assert!(
        out.contains(r#""field":"read_only_paths""#) && out.contains("isolation off"),
        "{out}"
    );
}

#[test]
fn hostile_read_only_paths_are_refused_naming_the_field() {
    let ws = workspace();
    for (path, why) in [
        ("relative/path", "absolute"),
        ("/nonexistent-outside/x", "outside the workspace"),
    ] {
        let o = run(
            As::Root,
            ws.path(),
            &["--read-only", path, "--", "/bin/true"],
        );
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(125), "{path}: {err}");
        assert!(
            err.contains("--read-only") || err.contains("read_only_paths"),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
    }
    for body in [
        r#"{"argv":["/bin/true"],"read_only_paths":["/tmp/a\u0000b"]}"#,
        r#"{"argv":["/bin/true"],"read_only_paths":["/nonexistent-outside/x"]}"#,
        r#"{"argv":["/bin/true"],"isolation":"sometimes"}"#,
    ] {
        let o = output_with_input(
            command(As::Root, SANDBOX).args(["exec", "--json"]),
            body.as_bytes(),
        );
        let (out, _) = text(&o);
        assert!(
            out.contains("read_only_paths") || out.contains("isolation"),
            "{body}: {out}"
        );
        assert!(out.contains("\"error\""), "{body}: {out}");
    }
}

#[test]
fn concurrent_requests_in_one_repository_share_the_placeholders() {
    // A plain repository has no `.git/commondir`: each job covers a placeholder for it. Many
    // jobs of one server at once must all run (they raced for the placeholder before), and
    // the placeholder is gone when the last one ends.
    let dir = workspace();
    git(dir.path(), &["init", "-q"]);
    let commondir = dir.path().join(".git/commondir");
    assert!(!commondir.exists());
    // A home of its own: the workspace as the home would be refused as too broad.
    let home = tempfile::tempdir().unwrap();
    let mut server = Command::new(SANDBOX)
        .args(["serve", "--max-concurrent", "8"])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    for i in 0..16 {
        let line = format!(
            "{{\"id\":\"{i}\",\"argv\":[\"/bin/sh\",\"-c\",\"sleep 0.2; echo ok\"],\"profile\":\"shell\",\"cwd\":\"{}\"}}\n",
            dir.path().display()
        );
        input.write_all(line.as_bytes()).unwrap();
    }
    drop(input);
    let out = server.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 16, "{text}");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["stdout"], "ok\n", "{line}");
    }
    assert!(!commondir.exists(), "the placeholder was left behind");
    // The same across processes, of two users: separate hosts in one repository at once.
    chmod_r(dir.path());
    let runs: Vec<Child> = (0..8)
        .map(|i| {
            let who = if i % 2 == 0 { As::Root } else { As::Nobody };
            command(who, SANDBOX)
                .args(["run", "--allow-root", "--profile", "shell", "--"])
                .args(["/bin/sh", "-c", "sleep 0.2; echo ok"])
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let o = r.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n", "{o:?}");
    }
    // A job removes only a placeholder its own user made, and only as its last holder: one
    // made by a user whose jobs all ended while the other user's still held it stays, for
    // the next job of the user who made it. One job of each, one after the other, removes it.
    for who in BOTH {
        let o = command(who, SANDBOX)
            .args([
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--",
                "/bin/true",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
    }
    assert!(!commondir.exists(), "the placeholder was left behind");
}

#[test]
fn a_killed_host_leaves_a_placeholder_git_works_with_and_the_next_job_removes() {
    let dir = workspace();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "one"]);
    chmod_r(dir.path());
    let commondir = dir.path().join(".git/commondir");
    let git_log = |who: As| {
        command(who, "git")
            .args(["-c", "safe.directory=*", "log", "--oneline"])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    // A job in the repository, then its host killed (its init and command die with it).
    let mut host = command(As::Root, SANDBOX)
        .args([
            "run",
            "--allow-root",
            "--profile",
            "shell",
            "--",
            "/bin/sleep",
            "300",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..1000 {
        if commondir.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(commondir.exists(), "no placeholder while the job runs");
    // Git outside works while the job runs...
    assert!(git_log(As::Root).status.success());
    host.kill().unwrap();
    host.wait().unwrap();
    // ...and after the host was killed, with the placeholder left behind.
    assert!(commondir.exists());
    for who in BOTH {
        let o = git_log(who);
        assert!(o.status.success(), "{who:?}: {:?}", text(&o));
    }
    // Control: an empty `commondir`, as placeholders were, breaks every git command (in a
    // repository of its own: the placeholder is recorded by its inode, which a copy would
    // not have).
    let other = workspace();
    git(other.path(), &["init", "-q"]);
    git(
        other.path(),
        &["commit", "-q", "--allow-empty", "-m", "one"],
    );
    fs::write(other.path().join(".git/commondir"), "").unwrap();
    let o = command(As::Root, "git")
        .args(["-c", "safe.directory=*", "log", "--oneline"])
        .current_dir(other.path())
        .output()
        .unwrap();
    assert!(!o.status.success(), "{:?}", text(&o));
    // A job of a user who may not change the repository leaves it (and its record)...
    let st = Command::new("chmod")
        .args(["-R", "go-w"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(st.success());
    let o = run(
        As::Nobody,
        dir.path(),
        &["--profile", "shell", "--", "/bin/true"],
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(commondir.exists(), "removed by a user who may not");
    // ...to the next job of one who may, whoever made it.
    let o = run(
        As::Root,
        dir.path(),
        &["--profile", "shell", "--", "/bin/true"],
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(!commondir.exists(), "the next job left the placeholder");
}

#[test]
fn protection_does_not_depend_on_tmpdir() {
    let ws = workspace();
    git(ws.path(), &["init", "-q"]);
    chmod_r(ws.path());
    let dir = ws.path().canonicalize().unwrap();
    let commondir = dir.join(".git/commondir");
    // A TMPDIR the user cannot write (its state directory's last resort, with no HOME, could
    // not be made there).
    let unwritable = tempfile::tempdir().unwrap();
    let attack =
        "echo x > .git/commondir && echo wrote-commondir; touch .git/hooks/pre-commit && echo wrote-hook";
    let run_as = |extra: &[&str]| {
        let mut c = command(As::Nobody, SANDBOX);
        c.args(["run", "--landlock", "off", "--profile", "shell"])
            .args(extra)
            .args(["--", "/bin/sh", "-c", attack])
            .env("TMPDIR", unwritable.path())
            .current_dir(&dir);
        c.output().unwrap()
    };
    let o = run_as(&[]);
    let (out, err) = text(&o);
    assert!(
        !out.contains("wrote-commondir") && !out.contains("wrote-hook"),
        "{out}{err}"
    );
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(!commondir.exists());
    // Control: without the namespaces both are written.
    let o = run_as(&["--isolation", "off"]);
    let (out, err) = text(&o);
    assert!(
        out.contains("wrote-commondir") && out.contains("wrote-hook"),
        "{out}{err}"
    );
    fs::remove_file(&commondir).unwrap();
    fs::remove_file(dir.join(".git/hooks/pre-commit")).unwrap();
}

/// As root, the fresh /proc's machine-wide files stay read-only even without Landlock:
/// `kernel.core_pattern` and the SysRq trigger are opened for writing (never written).
#[test]
fn root_cannot_open_the_machines_proc_files_for_writing() {
    if std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap_or(1)
        != 0
    {
        eprintln!("skipped: only root can write these files at all");
        return;
    }
    let ws = workspace();
    // This machine kind's kernel has no SysRq trigger; where it has one it is probed too.
    let probe = "for f in /proc/sys/kernel/core_pattern /proc/sysrq-trigger; do [ -e $f ] || continue; \
                 if (exec 3>>$f) 2>/dev/null; then echo \"open $f\"; else echo \"refused $f\"; fi; done";
    let profiles = ["unrestricted", "shell"];
    for p in profiles {
        let o = run(
            As::Root,
            ws.path(),
            &["--profile", p, "--", "/bin/sh", "-c", probe],
        );
        let (out, err) = text(&o);
        assert!(
            out.contains("refused /proc/sys/kernel/core_pattern") && !out.contains("open "),
            "{p}: {out}{err}"
        );
        // Control: the same command without the namespaces opens both for writing.
        let o = run(
            As::Root,
            ws.path(),
            &[
                "--profile",
                p,
                "--isolation",
                "off",
                "--",
                "/bin/sh",
                "-c",
                probe,
            ],
        );
        let (out, err) = text(&o);
        assert!(
            out.contains("open /proc/sys/kernel/core_pattern") && !out.contains("refused "),
            "control {p}: {out}{err}"
        );
    }
}

/// With `--isolation off`, a profile that refuses sockets no longer gets a network namespace
/// by default: alone, it put the program under an init that is not PID 1, whose session the
/// process-tree walk (uid 65534 has no writable cgroup here) did not cover, so a plain
/// background job outlived the run. Asking for `--network none` explicitly still puts it
/// there; `sandbox run` now counts what its host adopted as the run's, so the job ends there
/// too. Control: the same line outside the sandbox leaves the job running.
#[test]
fn without_isolation_a_background_job_ends_with_the_run() {
    for who in BOTH {
        let ws = workspace();
        let tag = format!("32{}", std::process::id() % 1000);
        let script = format!("sleep {tag}1 </dev/null >/dev/null 2>&1 & echo started");
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell",
                "--isolation",
                "off",
                "--",
                "/bin/sh",
                "-c",
                &script,
            ],
        );
        assert_eq!(text(&o).0, "started\n", "{who:?}: {}", text(&o).1);
        let left = tagged(&tag);
        for (pid, _) in &left {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert!(left.is_empty(), "{who:?}: {left:?}");
    }
    // The walk is the only containment for uid 65534 (no cgroup of its own): with the
    // explicit network namespace, the init that is no PID 1 ends nothing, and the job is
    // found as a process the host adopted.
    let ws = workspace();
    let tag = format!("33{}", std::process::id() % 1000);
    let script = format!("sleep {tag}1 </dev/null >/dev/null 2>&1 & echo started");
    let o = run(
        As::Nobody,
        ws.path(),
        &[
            "--profile",
            "shell",
            "--isolation",
            "off",
            "--network",
            "none",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(text(&o).0, "started\n", "{}", text(&o).1);
    let left = tagged(&tag);
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(left.is_empty(), "network none: {left:?}");
    // Control: outside the sandbox the job outlives its shell.
    let o = command(As::Nobody, "/bin/sh")
        .args(["-c", &script])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(text(&o).0, "started\n");
    let mut left = tagged(&tag);
    for _ in 0..300 {
        if left.iter().any(|(_, c)| c.starts_with("sleep\0")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        left = tagged(&tag);
    }
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.iter().any(|(_, c)| c.starts_with("sleep\0")),
        "control: outside the sandbox the job outlives its shell: {left:?}"
    );
}

/// An archive of `dir/f` owned by uid and gid 1001, as a PyPI sdist made by another user is.
fn archive_of_another_user(ws: &Path) -> std::path::PathBuf {
    let src = ws.join("pkg-1.0");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("setup.py"), "print('hi')\n").unwrap();
    let chown = Command::new("chown")
        .args(["-R", "1001:1001"])
        .arg(&src)
        .status()
        .unwrap();
    assert!(chown.success());
    let tar = ws.join("pkg-1.0.tar");
    let made = Command::new("tar")
        .arg("cf")
        .arg(&tar)
        .arg("pkg-1.0")
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(made.success());
    fs::remove_dir_all(&src).unwrap();
    tar
}

#[test]
fn roots_tar_unpacks_another_users_archive_and_a_refused_owner_change_is_named() {
    use std::os::unix::fs::MetadataExt;
    let ws = workspace();
    let tar = archive_of_another_user(ws.path());
    let owner = |ws: &Path| fs::metadata(ws.join("pkg-1.0/setup.py")).unwrap().uid();
    // Control: outside, root's tar gives the files the archive's owner (`--same-owner`).
    let outside = command(As::Root, "tar")
        .arg("xf")
        .arg(&tar)
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(outside.status.success(), "{:?}", text(&outside));
    assert_eq!(owner(ws.path()), 1001);
    fs::remove_dir_all(ws.path().join("pkg-1.0")).unwrap();

    // Inside, with the default layers: root's job holds no capabilities, and its default
    // TAR_OPTIONS has tar keep its own ownership, as it does for every other user.
    let run = |extra: &[&str], argv: &[&str]| {
        command(As::Root, SANDBOX)
            .args(["run", "--profile", "shell"])
            .args(extra)
            .arg("--")
            .args(argv)
            .current_dir(ws.path())
            .output()
            .unwrap()
    };
    let o = run(&["-v"], &["tar", "xf", "pkg-1.0.tar"]);
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("tier: isolated"), "{err}");
    assert_eq!(owner(ws.path()), 0);
    fs::remove_dir_all(ws.path().join("pkg-1.0")).unwrap();

    // A request that sets TAR_OPTIONS itself keeps it: tar then asks for the archive's owner,
    // which is refused, and named with the change.
    let o = run(&["--env", "TAR_OPTIONS="], &["tar", "xf", "pkg-1.0.tar"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/usr/bin/tar was refused fchown")
            && err.contains("pkg-1.0/setup.py: root's job holds no capabilities here,")
            && err.contains("tar --no-same-owner")
            && err.contains("--isolation off --allow-root"),
        "{err}"
    );

    // chown to another owner, through exec --json: one violation with its change, which,
    // applied once, lets the same call succeed.
    let req = r#"{"argv":["chown","1001","pkg-1.0/setup.py"],"profile":"shell"}"#;
    let mut exec = command(As::Root, SANDBOX);
    exec.args(["exec", "--json"]).current_dir(ws.path());
    let out = output_with_input(&mut exec, req.as_bytes());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 1, "{v}");
    let violation = &v["violations"][0];
    assert_eq!(violation["syscall"], "fchownat", "{v}");
    assert_eq!(
        violation["change"], "\"isolation\": \"off\" with \"allow_root\": true",
        "{v}"
    );
    let applied = run(
        &["--isolation", "off", "--allow-root"],
        &["chown", "1001", "pkg-1.0/setup.py"],
    );
    assert!(applied.status.success(), "{:?}", text(&applied));
    assert_eq!(owner(ws.path()), 1001);

    // Writing another user's file (mode 0644) is refused the same way, and named; root
    // outside writes it (the control).
    let o = run(&[], &["sh", "-c", "echo more >> pkg-1.0/setup.py"]);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("was refused openat")
            && err.contains("pkg-1.0/setup.py: root's job holds no capabilities here,"),
        "{err}"
    );
    let outside = command(As::Root, "sh")
        .args(["-c", "echo more >> pkg-1.0/setup.py"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(outside.status.success(), "{:?}", text(&outside));

    // Another user's jobs get no TAR_OPTIONS: tar keeps ownership for them anyway.
    let o = command(As::Nobody, SANDBOX)
        .args(["run", "--", "sh", "-c", "echo ${TAR_OPTIONS-unset}"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(text(&o).0, "unset\n", "{:?}", text(&o));
}
