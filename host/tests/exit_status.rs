//! The `sandbox` command's exit statuses, one test per row of the table in docs/reference.md
//! ("Exit statuses"), as root and as uid 65534, from a bare environment with stdin /dev/null.
//!
//! Usage errors (the command line does not parse) exit 2 in every subcommand; a misspelt flag
//! before the program of `run` or `learn` is one of them, with clap's suggestion, where it used
//! to be taken for the program (127).

mod common;

use common::{sandbox, As, BOTH};
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `sandbox ARGS` run as `who` from a scratch directory of its own (the default workspace is the
/// working directory; uid 65534 must be able to enter it).
fn run_as(who: As, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    sandbox(who)
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap()
}

/// Every subcommand, with the arguments it needs to parse (`exec`'s `--json` is required).
const SUBCOMMANDS: &[&[&str]] = &[
    &["run"],
    &["env"],
    &["extract"],
    &["check"],
    &["profiles"],
    &["profiles", "show", "minimal"],
    &["profiles", "groups"],
    &["profiles", "credentials"],
    &["profiles", "control-files"],
    &["inspect", "/bin/true"],
    &["exec", "--json"],
    &["serve"],
    &["mcp"],
    &["export", "--format", "oci"],
    &["import", "/dev/null"],
    &["learn"],
    &["session", "start"],
    &["session", "end", "0123456789abcdef01234567"],
    &["session", "list"],
    &["completions", "bash"],
];

/// Row 2: a flag no subcommand knows is a usage error everywhere: exit 2, clap's message naming
/// the word on stderr, nothing on stdout, nothing run.
#[test]
fn an_unknown_flag_is_a_usage_error_in_every_subcommand() {
    for who in BOTH {
        for sub in SUBCOMMANDS {
            let mut args = sub.to_vec();
            args.extend(["--no-such-flag", "--", "/bin/true"]);
            let o = run_as(who, &args);
            assert_eq!(o.status.code(), Some(2), "{who:?} {args:?}: {o:?}");
            assert!(o.stdout.is_empty(), "{who:?} {args:?}: {o:?}");
            let err = text(&o.stderr);
            assert!(
                err.contains("unexpected argument '--no-such-flag'"),
                "{who:?} {args:?}: {err}"
            );
        }
        // A value outside a fixed set (empty, with a newline, in capitals, huge) is one too,
        // naming the flag.
        let huge = "x".repeat(100_000);
        for (flag, value) in [
            ("--landlock", ""),
            ("--isolation", "required\n"),
            ("--network", "NONE"),
            ("--static-binary", huge.as_str()),
            ("--on-violation", "kil"),
        ] {
            let args = ["run", flag, value, "--", "/bin/true"];
            let o = run_as(who, &args);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{who:?} {flag} {:?}: {o:?}",
                &value[..value.len().min(20)]
            );
            let err = text(&o.stderr);
            assert!(
                err.contains("invalid value") && err.contains(flag),
                "{err:.300}"
            );
        }
        // No subcommand, an unknown one, a missing program: usage errors too.
        for args in [&[][..], &["runn"], &["run"], &["run", "--profile", "shell"]] {
            let o = run_as(who, args);
            assert_eq!(o.status.code(), Some(2), "{who:?} {args:?}: {o:?}");
        }
    }
}

/// Row 2: a misspelt flag before the program is refused with the flag it resembles; the control
/// is the same word after `--`, which is the program's name (not found: 127), and the correctly
/// spelt flag, which runs.
#[test]
fn a_misspelt_flag_before_the_program_is_a_usage_error_with_a_suggestion() {
    for who in BOTH {
        for (args, meant) in [
            (
                &["run", "--profle", "shell", "--", "/bin/true"][..],
                "--profile",
            ),
            (
                &["run", "--profile", "shell", "--timeot", "3", "/bin/true"],
                "--timeout",
            ),
            (
                &["run", "--alow-write", "/tmp", "/bin/true"],
                "--allow-write",
            ),
            (&["learn", "--bse", "minimal", "--", "/bin/true"], "--base"),
            (&["env", "--profle", "shell"], "--profile"),
            (
                &["export", "--format", "oci", "--profle", "shell"],
                "--profile",
            ),
        ] {
            let o = run_as(who, args);
            assert_eq!(o.status.code(), Some(2), "{who:?} {args:?}: {o:?}");
            let err = text(&o.stderr);
            assert!(
                err.contains(&format!("a similar argument exists: '{meant}'")),
                "{who:?} {args:?}: {err}"
            );
            assert!(o.stdout.is_empty(), "{who:?} {args:?}: {o:?}");
        }
        // Controls: after `--` the word is the program; spelt right, the flag is taken.
        let o = run_as(who, &["run", "--", "--profle", "shell"]);
        assert_eq!(o.status.code(), Some(127), "{who:?}: {o:?}");
        assert!(
            text(&o.stderr).contains("--profle: command not found"),
            "{o:?}"
        );
        let o = run_as(who, &["run", "--profile", "shell", "--", "/bin/true"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
        // Everything after the program is the program's, flag-like or not, with or without `--`.
        let o = run_as(who, &["run", "/bin/echo", "a", "--profle", "-v"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
        assert_eq!(text(&o.stdout), "a --profle -v\n", "{who:?}: {o:?}");
    }
}

/// Rows 0 and N: the program's own status.
#[test]
fn the_program_status_is_the_commands() {
    for who in BOTH {
        let o = run_as(
            who,
            &["run", "--profile", "shell", "--", "sh", "-c", "exit 0"],
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
        let o = run_as(
            who,
            &["run", "--profile", "shell", "--", "sh", "-c", "exit 42"],
        );
        assert_eq!(o.status.code(), Some(42), "{who:?}: {o:?}");
    }
}

/// Row 124: `--timeout` ended the program; the control without it lets the same command end by
/// itself with 0.
#[test]
fn a_timeout_exits_124() {
    for who in BOTH {
        let o = run_as(
            who,
            &[
                "run",
                "--profile",
                "shell",
                "--timeout",
                "1",
                "--",
                "sleep",
                "5",
            ],
        );
        assert_eq!(o.status.code(), Some(124), "{who:?}: {o:?}");
        let o = run_as(who, &["run", "--profile", "shell", "--", "sleep", "0.1"]);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
    }
}

/// Row 125: the sandbox refused (a profile that does not exist, a hostile value); nothing runs.
#[test]
fn a_refusal_of_the_sandbox_exits_125() {
    for who in BOTH {
        for args in [
            &["run", "--profile", "no-such-profile", "--", "/bin/true"][..],
            &["run", "--workspace", "relative", "--", "/bin/true"],
            &["run", "--env", "LD_PRELOAD=/x.so", "--", "/bin/true"],
        ] {
            let o = run_as(who, args);
            assert_eq!(o.status.code(), Some(125), "{who:?} {args:?}: {o:?}");
            assert!(text(&o.stderr).starts_with("sandbox: "), "{args:?}: {o:?}");
        }
        let o = common::output_with_input(
            sandbox(who).args(["exec", "--json"]).current_dir("/"),
            b"{\"argv\":[]}",
        );
        assert_eq!(o.status.code(), Some(125), "{who:?}: {o:?}");
    }
}

/// Rows 126 and 127: like a shell, for `run`, `learn`, `inspect` and `exec --json`.
#[test]
fn cannot_execute_is_126_and_not_found_is_127() {
    for who in BOTH {
        for sub in [&["run", "--"][..], &["learn", "--"], &["inspect"]] {
            let mut args = sub.to_vec();
            args.push("/etc");
            let o = run_as(who, &args);
            assert_eq!(o.status.code(), Some(126), "{who:?} {args:?}: {o:?}");
            let mut args = sub.to_vec();
            args.push("no-such-program-here");
            let o = run_as(who, &args);
            assert_eq!(o.status.code(), Some(127), "{who:?} {args:?}: {o:?}");
        }
        for (argv, code) in [("/etc", 126), ("/no/such/program", 127)] {
            let o = common::output_with_input(
                sandbox(who).args(["exec", "--json"]).current_dir("/"),
                format!("{{\"argv\":[\"{argv}\"]}}").as_bytes(),
            );
            assert_eq!(o.status.code(), Some(code), "{who:?} {argv}: {o:?}");
        }
    }
}

/// Row 128+N: a signal ended the program; 159 is SIGSYS from the filter under
/// `--on-violation kill`, with the call named. The control: the same program allowed sockets
/// (`network`) exits 0.
#[test]
fn a_signal_is_128_plus_its_number() {
    let socket = "import socket; socket.socket()";
    for who in BOTH {
        let o = run_as(
            who,
            &[
                "run",
                "--profile",
                "shell",
                "--",
                "sh",
                "-c",
                "kill -TERM $$",
            ],
        );
        assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{who:?}: {o:?}");
        let o = run_as(
            who,
            &[
                "run",
                "--on-violation",
                "kill",
                "--",
                "/usr/bin/python3",
                "-c",
                socket,
            ],
        );
        assert_eq!(o.status.code(), Some(159), "{who:?}: {o:?}");
        assert!(text(&o.stderr).contains("syscall socket"), "{who:?}: {o:?}");
        let o = run_as(
            who,
            &[
                "run",
                "--profile",
                "network",
                "--on-violation",
                "kill",
                "--",
                "/usr/bin/python3",
                "-c",
                socket,
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {o:?}");
    }
}

/// Whether a process whose command line holds `marker` is running.
fn running(marker: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn sigterm_sigint_and_sighup_to_run_end_the_jobs_tree_in_every_tier() {
    // A job used to outlive a `sandbox run` that was sent SIGTERM in the contained and
    // filtered tiers (only the isolated tier's init took the tree along). Now the run ends
    // the tree and dies of the same signal (128 + N to the caller's shell).
    use std::os::unix::process::ExitStatusExt;
    let tiers: [&[&str]; 3] = [
        &[],
        &["--isolation", "off"],
        &["--isolation", "off", "--landlock", "off"],
    ];
    for who in BOTH {
        for (i, tier) in tiers.iter().enumerate() {
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                let marker = format!("1000.{}{i}{sig}", std::process::id());
                let script = format!("sleep {marker} & sleep {marker}; echo survived");
                let child = common::command(who, common::SANDBOX)
                    .args(["run", "--allow-root", "--profile", "shell"])
                    .args(*tier)
                    .args(["--", "bash", "-c", &script])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let t0 = std::time::Instant::now();
                while !running(&marker) && t0.elapsed().as_secs() < 20 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                assert!(running(&marker), "{who:?} {tier:?}: the job did not start");
                // SAFETY: a signal to our own child.
                unsafe { libc::kill(child.id() as i32, sig) };
                let o = child.wait_with_output().unwrap();
                assert_eq!(o.status.signal(), Some(sig), "{who:?} {tier:?} {sig}");
                let t0 = std::time::Instant::now();
                while running(&marker) && t0.elapsed().as_secs() < 5 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                assert!(
                    !running(&marker),
                    "{who:?} {tier:?} {sig}: the tree outlived the run"
                );
                assert!(!text(&o.stdout).contains("survived"), "{who:?} {tier:?}");
            }
        }
    }
    // Control: the same script without the sandbox, its bash sent SIGTERM: the background
    // process outlives it (ending the tree is the sandbox's doing, not the shell's).
    let marker = format!("1000.{}99", std::process::id());
    let mut child = std::process::Command::new("bash")
        .args(["-c", &format!("sleep {marker} & sleep {marker}")])
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !running(&marker) && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let survived = running(&marker);
    let _ = std::process::Command::new("pkill")
        .args(["-f", &marker])
        .status();
    assert!(
        survived,
        "the control's background process did not outlive its shell"
    );
}
