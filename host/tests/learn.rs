//! `sandbox learn` end to end, run as agents run commands (bare environment, no terminal,
//! stdin /dev/null): the learned profile runs the learned command and refuses a call the run
//! did not make; static programs, descendants and written paths are seen; a killed, timed-out
//! or daemonizing command still gives a profile and leaves nothing running; bad input changes
//! nothing; the same as an unprivileged user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;

use common::{As, SANDBOX};

/// `sandbox ARGS` in a bare environment, from `dir`, optionally as nobody.
fn sandbox_in(dir: &Path, args: &[&str], nobody: bool) -> Output {
    let who = if nobody { As::Nobody } else { As::Root };
    let mut c = common::sandbox(who);
    // A home of nobody's own beside `dir`: the working directory as the home would be refused
    // as too broad a workspace.
    let home = dir.with_extension("home");
    if nobody {
        let _ = std::fs::create_dir(&home);
        let _ = std::os::unix::fs::chown(&home, Some(common::NOBODY), Some(common::NOBODY));
        c.env("HOME", &home);
    }
    let out = c
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sandbox runs");
    let _ = std::fs::remove_dir_all(&home);
    out
}

fn sandbox(dir: &Path, args: &[&str]) -> Output {
    sandbox_in(dir, args, false)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A directory everyone may use (the unprivileged tests write in it too).
fn workdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// The names a learned profile allows.
fn allowed(profile: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(profile).unwrap();
    let p = sandbox_policy::profile::Profile::from_toml("learned", &text)
        .unwrap_or_else(|e| panic!("the learned profile parses: {e}\n{text}"));
    p.allow().expect("an allow list").to_vec()
}

/// A Python program that opens a socket only when given an argument.
const SOCKET_PY: &str = "import socket, sys\nif len(sys.argv) > 1:\n    socket.socket().close()\n";

#[test]
fn the_learned_profile_runs_the_command_and_refuses_a_call_the_run_did_not_make() {
    for nobody in [false, true] {
        let d = workdir();
        let dir = d.path();
        std::fs::write(dir.join("prog.py"), SOCKET_PY).unwrap();
        let o = sandbox_in(
            dir,
            &[
                "learn",
                "--out",
                "quiet.toml",
                "--",
                "/usr/bin/python3",
                "prog.py",
            ],
            nobody,
        );
        assert_eq!(o.status.code(), Some(0), "nobody={nobody}: {}", err(&o));
        assert_eq!(
            out(&o),
            "",
            "the command printed nothing; --out took the profile"
        );
        let quiet = dir.join("quiet.toml");
        let names = allowed(&quiet);
        assert!(names.iter().any(|n| n == "openat"), "{names:?}");
        assert!(!names.iter().any(|n| n == "socket"), "{names:?}");
        let text = std::fs::read_to_string(&quiet).unwrap();
        assert!(
            text.contains("/usr/bin/python3"),
            "comments name the program: {text}"
        );

        // The learned profile runs the learned command.
        let run = |profile: &str, args: &[&str]| {
            let mut a = vec!["run", "--allow-root", "--profile", profile, "--"];
            a.extend(args);
            sandbox_in(dir, &a, nobody)
        };
        let o = run("quiet.toml", &["/usr/bin/python3", "prog.py"]);
        assert_eq!(o.status.code(), Some(0), "nobody={nobody}: {}", err(&o));
        // ... and refuses the socket the run did not make, naming it: the call fails and is
        // reported, or with --on-violation kill the program is stopped.
        let o = run("quiet.toml", &["/usr/bin/python3", "prog.py", "x"]);
        assert_eq!(o.status.code(), Some(1), "nobody={nobody}: {}", err(&o));
        assert!(err(&o).contains("refused socket"), "{}", err(&o));
        let o = sandbox_in(
            dir,
            &[
                "run",
                "--allow-root",
                "--on-violation",
                "kill",
                "--profile",
                "quiet.toml",
                "--",
                "/usr/bin/python3",
                "prog.py",
                "x",
            ],
            nobody,
        );
        assert_eq!(o.status.code(), Some(159), "nobody={nobody}: {}", err(&o));
        assert!(err(&o).contains("socket"), "{}", err(&o));
        // Control: the socket works without the profile, and a run that made it learns it.
        let o = run("unrestricted", &["/usr/bin/python3", "prog.py", "x"]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let o = sandbox_in(
            dir,
            &[
                "learn",
                "--out",
                "net.toml",
                "--",
                "/usr/bin/python3",
                "prog.py",
                "x",
            ],
            nobody,
        );
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        assert!(allowed(&dir.join("net.toml")).iter().any(|n| n == "socket"));
        let o = run("net.toml", &["/usr/bin/python3", "prog.py", "x"]);
        assert_eq!(o.status.code(), Some(0), "nobody={nobody}: {}", err(&o));
    }
}

#[test]
fn the_summary_marks_calls_the_base_refuses() {
    let d = workdir();
    let dir = d.path();
    std::fs::write(dir.join("prog.py"), SOCKET_PY).unwrap();
    let learn = |base: &str| {
        sandbox(
            dir,
            &[
                "learn",
                "--base",
                base,
                "--out",
                "p.toml",
                "--",
                "/usr/bin/python3",
                "prog.py",
                "x",
            ],
        )
    };
    let o = learn("minimal");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let row = err(&o)
        .lines()
        .find(|l| l.trim_start().starts_with("network"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("a network row: {}", err(&o)));
    assert!(row.contains("1: socket"), "{row}");
    let text = std::fs::read_to_string(dir.join("p.toml")).unwrap();
    assert!(text.contains("\"socket\","), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("\"socket\",") && l.contains("# new;")),
        "{text}"
    );
    // The network profile allows an AF_INET socket: nothing in that row is new.
    let o = learn("network");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let row = err(&o)
        .lines()
        .find(|l| l.trim_start().starts_with("network"))
        .map(str::to_string)
        .unwrap();
    assert!(row.trim_end().ends_with('-'), "{row}");
}

const STATIC_C: &str = r#"
#include <unistd.h>
#include <stdio.h>
int main(void) {
    printf("%d\n", getppid() > 0);
    return 0;
}
"#;

#[test]
fn a_static_program_is_learned_and_its_profile_confines_it() {
    let d = workdir();
    let dir = d.path();
    std::fs::write(dir.join("s.c"), STATIC_C).unwrap();
    let o = Command::new("gcc")
        .args(["-static", "-o"])
        .arg(dir.join("static-prog"))
        .arg(dir.join("s.c"))
        .output()
        .expect("gcc");
    assert!(o.status.success(), "{}", err(&o));
    let o = sandbox(dir, &["learn", "--out", "s.toml", "--", "./static-prog"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let names = allowed(&dir.join("s.toml"));
    assert!(
        names.iter().any(|n| n == "getppid"),
        "the static program's own call: {names:?}"
    );
    let run = |profile: &str| {
        sandbox(
            dir,
            &[
                "run",
                "--allow-root",
                "--static-binary",
                "confine",
                "--profile",
                profile,
                "--",
                "./static-prog",
            ],
        )
    };
    let o = run("s.toml");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), "1\n");
    // Control: without getppid the same profile stops it.
    let text = std::fs::read_to_string(dir.join("s.toml")).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("\"getppid\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("cut.toml"), cut).unwrap();
    let o = run("cut.toml");
    assert_eq!(out(&o), "0\n", "getppid failed: {}", err(&o));
    assert!(err(&o).contains("refused getppid"), "{}", err(&o));
}

#[test]
fn descendants_and_written_paths_are_recorded() {
    let d = workdir();
    let dir = d.path();
    let script = "echo hi > abs-out; mkdir sub; cd sub && touch rel; /bin/rm ../abs-out; \
                  cat /etc/hostname > /dev/null";
    let o = sandbox(dir, &["learn", "--out", "p.toml", "--", "sh", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = std::fs::read_to_string(dir.join("p.toml")).unwrap();
    let real = dir.canonicalize().unwrap();
    for (path, program) in [
        (real.join("abs-out"), "dash"),
        (real.join("sub"), "/usr/bin/mkdir"),
        (real.join("sub/rel"), "touch"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("#   {}  (", path.display())))
            .unwrap_or_else(|| panic!("{} listed: {text}", path.display()));
        assert!(line.contains(program), "{line}");
    }
    assert!(
        !text.contains("#   /etc/hostname"),
        "a path only read is not listed"
    );
    for call in ["execve", "wait4", "mkdir", "unlinkat"] {
        assert!(
            allowed(&dir.join("p.toml")).iter().any(|n| n == call),
            "{call}: {text}"
        );
    }
    // Each call names its programs: touch's utimensat is its own, not dash's.
    let line = text.lines().find(|l| l.contains("\"utimensat\",")).unwrap();
    assert!(
        line.contains("/usr/bin/touch") && !line.contains("dash"),
        "{line}"
    );
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn a_killed_timed_out_or_daemonizing_command_still_gives_a_profile_and_leaves_nothing() {
    let d = workdir();
    let dir = d.path();
    // Killed by a signal: status 128+9, and the profile holds the kill.
    let o = sandbox(
        dir,
        &["learn", "--out", "k.toml", "--", "sh", "-c", "kill -9 $$"],
    );
    assert_eq!(o.status.code(), Some(137), "{}", err(&o));
    assert!(err(&o).contains("was killed by signal 9"), "{}", err(&o));
    assert!(allowed(&dir.join("k.toml")).iter().any(|n| n == "kill"));

    // Timed out: status 124; the sleep it started is gone and its calls are there.
    let o = sandbox(
        dir,
        &[
            "learn",
            "--timeout",
            "1",
            "--out",
            "t.toml",
            "--",
            "sh",
            "-c",
            "sleep 300 & echo $! > t.pid; wait",
        ],
    );
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(err(&o).contains("timed out"), "{}", err(&o));
    let names = allowed(&dir.join("t.toml"));
    assert!(
        names
            .iter()
            .any(|n| n == "clock_nanosleep" || n == "nanosleep"),
        "the sleep's own calls: {names:?}"
    );
    let pid: i32 = std::fs::read_to_string(dir.join("t.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the timed-out command's child {pid} is gone");

    // A daemon (new session, parent gone at once): recorded, then ended with the command.
    let daemon = "setsid sh -c 'echo $$ > d.pid; exec sleep 300' & sleep 0.5";
    let o = sandbox(dir, &["learn", "--out", "d.toml", "--", "sh", "-c", daemon]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let pid: i32 = std::fs::read_to_string(dir.join("d.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the daemon {pid} was ended");
    assert!(allowed(&dir.join("d.toml")).iter().any(|n| n == "setsid"));
    // Control: started plainly, the same daemon outlives its command.
    std::fs::remove_file(dir.join("d.pid")).unwrap();
    // (Its streams go nowhere: the daemon keeps them open.)
    let status = Command::new("sh")
        .args(["-c", daemon])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let pid: i32 = std::fs::read_to_string(dir.join("d.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "control: the daemon survives a plain run");
    // SAFETY: ends the control's daemon.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[test]
fn without_out_the_profile_is_all_of_standard_output() {
    let d = workdir();
    let o = sandbox(d.path(), &["learn", "--", "echo", "from-the-command"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).starts_with("# Learned by `sandbox learn` from: echo from-the-command"));
    assert!(!out(&o).contains("\nfrom-the-command"));
    assert!(err(&o).contains("from-the-command\n"), "{}", err(&o));
    sandbox_policy::profile::Profile::from_toml("p", &out(&o)).unwrap();
}

#[test]
fn no_progress_line_without_a_terminal_and_one_on_a_terminal() {
    let d = workdir();
    let o = sandbox(
        d.path(),
        &["learn", "--out", "p.toml", "--", "sleep", "1.6"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!err(&o).contains('\r'), "{:?}", err(&o));
    // On a terminal (script(1) gives the command one) the line appears after a second.
    let cmd = format!("{SANDBOX} learn --out p.toml -- sleep 1.6");
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(d.path())
        .stdin(Stdio::null())
        .output()
        .expect("script (bsdutils)");
    let text = out(&o);
    assert!(
        text.contains("\r\x1b[Ksandbox learn: ") && text.contains(" calls, "),
        "{text:?}"
    );
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let d = workdir();
    let dir = d.path();
    std::fs::create_dir(dir.join("adir")).unwrap();
    let marker = |o: &Output, what: &str| {
        assert_eq!(o.status.code(), Some(125), "{what}: {}", err(o));
        assert_eq!(err(o).lines().count(), 1, "{what}: one line: {}", err(o));
        assert!(!dir.join("ran").exists(), "{what}: the command did not run");
    };
    let cases: &[(&[&str], &str)] = &[
        (&["--out", "adir"], "--out adir: is a directory"),
        (&["--out", "missing/p.toml"], "--out missing/p.toml: "),
        (&["--base", "no-such-profile"], "--base: unknown profile"),
        (&["--base", "adir/x.toml"], "--base: profile adir/x.toml"),
        (
            &["--timeout", "0"],
            "--timeout: must be between 1 and 86400 seconds",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec!["learn"];
        args.extend(*flags);
        args.extend(["--", "touch", "ran"]);
        let o = sandbox(dir, &args);
        marker(&o, says);
        assert!(err(&o).contains(says), "{flags:?}: {}", err(&o));
    }
    let o = sandbox(dir, &["learn", "--out", "p.toml", "--", "no-such-program"]);
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    assert!(!dir.join("p.toml").exists(), "nothing written");
    for flags in [&["--timeout", "-1"][..], &["--out", ""]] {
        let mut args = vec!["learn"];
        args.extend(flags);
        args.extend(["--", "touch", "ran"]);
        let o = sandbox(dir, &args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "clap refuses {flags:?}: {}",
            err(&o)
        );
        assert!(!dir.join("ran").exists());
    }
    let o = sandbox(dir, &["learn", "--timeout", "-1", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "clap refuses: {}", err(&o));
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "adir")
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary files left: {leftovers:?}"
    );
}
