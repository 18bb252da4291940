//! `sandbox run`'s environment: the caller's variables stay out except the safe list, what
//! `--keep-env` names and what `--env` sets; variables that load code are refused by name, as
//! exec requests refuse them. As root and as uid 65534, through `bash -c` as agents run things.

mod common;

use common::{command, As, BOTH, SANDBOX};
use std::process::Output;

/// What an agent's environment typically carries and a command must not see.
const CALLER_SECRETS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-secret-value"),
    ("SSH_AUTH_SOCK", "/x/agent.sock"),
    ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus"),
    ("GITHUB_TOKEN", "ghp_secretsecret"),
];

/// `line` run by `bash -c` as `who` in the bare environment plus the caller's secrets, from
/// the system temporary directory.
fn agent(who: As, line: &str) -> Output {
    let mut c = command(who, "/bin/bash");
    c.args(["-c", line])
        .envs(CALLER_SECRETS.iter().copied())
        .current_dir(std::env::temp_dir());
    c.output().expect("bash")
}

/// `sandbox run ARGS -- env` as `who`, through `bash -c`.
fn run_env(who: As, args: &str) -> Output {
    agent(who, &format!("{SANDBOX} run --allow-root {args} -- env"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_callers_secrets_do_not_reach_the_program() {
    for who in BOTH {
        // Control: the same command outside the sandbox sees every one of them.
        let control = agent(who, "env");
        let seen = text(&control.stdout);
        for (k, v) in CALLER_SECRETS {
            assert!(
                seen.contains(&format!("{k}={v}")),
                "{who:?}: control: {seen}"
            );
        }
        let o = run_env(who, "");
        let seen = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(
            text(&o.stderr),
            "",
            "{who:?}: nothing on stderr when all is well"
        );
        for (k, _) in CALLER_SECRETS {
            assert!(
                !seen.contains(&format!("{k}=")),
                "{who:?}: {k} reached it: {seen}"
            );
        }
        // The safe list keeps the caller's values.
        for kv in ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"] {
            assert!(seen.lines().any(|l| l == kv), "{who:?}: {kv}: {seen}");
        }
        let home = match who {
            As::Root => "HOME=/root",
            As::Nobody => "HOME=/nonexistent",
        };
        assert!(seen.lines().any(|l| l == home), "{who:?}: {seen}");
    }
}

#[test]
fn keep_env_and_env_pass_what_is_asked_and_nothing_more() {
    for who in BOTH {
        let o = run_env(
            who,
            "--keep-env ANTHROPIC_API_KEY --keep-env NOT_SET_ANYWHERE --env FOO=bar \
             --env 'SPACED=a b=c' --env GIT_PAGER=cat --env EMPTY=",
        );
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{who:?}");
        let seen = text(&o.stdout);
        for kv in [
            "ANTHROPIC_API_KEY=sk-ant-secret-value",
            "FOO=bar",
            "SPACED=a b=c",
            "GIT_PAGER=cat",
            "EMPTY=",
        ] {
            assert!(seen.lines().any(|l| l == kv), "{who:?}: {kv}: {seen}");
        }
        for k in [
            "SSH_AUTH_SOCK=",
            "DBUS_SESSION_BUS_ADDRESS=",
            "NOT_SET_ANYWHERE=",
        ] {
            assert!(!seen.contains(k), "{who:?}: {k}: {seen}");
        }
        // --env replaces a safe-list value and a kept one.
        let o = run_env(
            who,
            "--keep-env GITHUB_TOKEN --env GITHUB_TOKEN=other --env LANG=C",
        );
        let seen = text(&o.stdout);
        assert!(seen.lines().any(|l| l == "GITHUB_TOKEN=other"), "{seen}");
        assert!(seen.lines().any(|l| l == "LANG=C"), "{seen}");
    }
}

#[test]
fn a_value_with_a_newline_reaches_the_program_whole() {
    for who in BOTH {
        let mut c = command(who, SANDBOX);
        c.args([
            "run",
            "--allow-root",
            "--env",
            "MULTI=a\nb",
            "--",
            "/bin/sh",
            "-c",
            "printf %s \"$MULTI\"",
        ])
        .current_dir(std::env::temp_dir());
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "a\nb", "{who:?}");
    }
}

#[test]
fn a_huge_value_reaches_the_program_and_a_non_utf8_one_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    for who in BOTH {
        // 100 KiB, below the kernel's 128 KiB limit on one argument.
        let big = "x".repeat(100 * 1024);
        let mut c = command(who, SANDBOX);
        c.args(["run", "--allow-root", "--env"])
            .arg(format!("BIG={big}"))
            .args(["--", "/bin/sh", "-c", "echo ${#BIG}"])
            .current_dir(std::env::temp_dir());
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout).trim(), "102400", "{who:?}");

        // Control: the caller's non-UTF-8 variable is set (env shows it outside).
        let raw = std::ffi::OsStr::from_bytes(b"a\xffb");
        let mut c = command(who, "/usr/bin/env");
        c.env("RAW", raw);
        let o = c.output().unwrap();
        assert!(
            o.stdout.windows(6).any(|w| w == b"RAW=a\xff"),
            "{who:?}: control"
        );
        let mut c = command(who, SANDBOX);
        c.args([
            "run",
            "--allow-root",
            "--keep-env",
            "RAW",
            "--",
            "/bin/true",
        ])
        .env("RAW", raw)
        .current_dir(std::env::temp_dir());
        let o = c.output().unwrap();
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {e}");
        assert_eq!(
            e,
            "sandbox: --keep-env `RAW`: the caller's value is not UTF-8\n"
        );
    }
}

/// The refused requests: the flag and its value, and what the one stderr line must say.
const REFUSED: &[(&str, &str, &str)] = &[
    ("--keep-env", "LD_PRELOAD", "load or run extra code"),
    ("--env", "LD_PRELOAD=/tmp/x.so", "load or run extra code"),
    ("--env", "BASH_ENV=/tmp/x", "load or run extra code"),
    ("--env", "GIT_CONFIG_COUNT=1", "load or run extra code"),
    ("--env", "GIT_DIR=/tmp", "load or run extra code"),
    ("--env", "XDG_CONFIG_HOME=/tmp", "load or run extra code"),
    ("--env", "LESSOPEN=|cat %s", "load or run extra code"),
    (
        "--env",
        "PYTHONWARNINGS=ignore::this.W",
        "load or run extra code",
    ),
    (
        "--env",
        "NODE_OPTIONS=--require=/tmp/x.js",
        "load or run extra code",
    ),
    (
        "--env",
        "BASH_FUNC_ls%%=() { id; }",
        "load or run extra code",
    ),
    ("--env", "GIT_PAGER=less", "only an inert one"),
    ("--keep-env", "SANDBOX_LANDLOCK", "reserved for the sandbox"),
    (
        "--env",
        "SECCOMP_SYSCALL_ALLOW=read",
        "reserved for the sandbox",
    ),
    ("--env", "_X=1", "reserved"),
    // Hostile input.
    ("--env", "=value", "empty variable name"),
    ("--keep-env", "", "empty variable name"),
    ("--keep-env", "A=B", "must not contain `=`"),
    ("--env", "NOEQUALS", "expected NAME=VALUE"),
    ("--env", "A\nB=1", "printable ASCII"),
    ("--keep-env", "A\nB", "printable ASCII"),
    ("--env", "A B=1", "printable ASCII"),
    ("--env", "\u{e9}T\u{e9}=1", "printable ASCII"),
    ("--env", "\u{1b}[2J=1", "printable ASCII"),
];

#[test]
fn refused_variables_are_named_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let marker = dir.path().join("ran");
    let marker_s = marker.display().to_string();
    for who in BOTH {
        // Control: an ordinary variable given the same way, and the program runs (it creates
        // the marker under a profile that may write there).
        let mut c = command(who, SANDBOX);
        c.args(["run", "--allow-root", "--profile", "write", "--workspace"])
            .arg(dir.path())
            .args(["--env", "FOO=1", "--", "touch", &marker_s]);
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{who:?}: {}", text(&o.stderr));
        assert!(marker.exists(), "{who:?}: control failed");
        std::fs::remove_file(&marker).unwrap();
        for (flag, value, says) in REFUSED {
            let mut c = command(who, SANDBOX);
            c.args(["run", "--allow-root", "--profile", "write", "--workspace"])
                .arg(dir.path())
                .args([flag, value, "--", "touch", &marker_s]);
            let o = c.output().unwrap();
            let e = text(&o.stderr);
            assert_eq!(o.status.code(), Some(125), "{who:?} {flag} {value:?}: {e}");
            assert_eq!(
                e.lines().count(),
                1,
                "{who:?} {flag} {value:?}: one line: {e}"
            );
            assert!(
                e.starts_with(&format!("sandbox: {flag} `")) && e.contains(says),
                "{who:?} {flag} {value:?}: {e}"
            );
            assert!(
                !marker.exists(),
                "{who:?} {flag} {value:?}: the program ran"
            );
        }
    }
}
