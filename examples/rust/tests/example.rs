//! The Rust example runs as documented (docs/getting-started.md), as root and as uid 65534,
//! from a bare environment with stdin /dev/null and a project directory of its own.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};

const EXAMPLE: &str = env!("CARGO_BIN_EXE_sandbox-example");

/// A fresh directory anyone may enter and write: the job's working directory (the `shell`
/// profile's default workspace).
fn project(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

fn run(program: &str, args: &[&str], nobody: bool, dir: &std::path::Path) -> Output {
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            program,
        ]);
        c
    } else {
        Command::new(program)
    };
    c.args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("HOME", if nobody { "/nonexistent" } else { "/root" })
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_example_runs_an_allowed_command_names_a_refused_call_and_reports_a_rejection() {
    for nobody in [false, true] {
        let dir = project(if nobody { "nobody" } else { "root" });
        let o = run(EXAMPLE, &[], nobody, &dir);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "nobody={nobody}: {o:?}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(
            lines[0], "echo: exit 0: \"HELLO FROM THE SANDBOX\\n\"",
            "{out}"
        );
        assert!(
            lines[1].starts_with("socket: exit 1, refused: socket by /usr/bin/python3"),
            "{out}"
        );
        assert!(
            lines[1].contains("--profile network") || lines[1].contains("network"),
            "{out}"
        );
        assert!(lines[2].starts_with("bad: refused: argv[0]: "), "{out}");
        // Control: the same socket call outside the sandbox succeeds.
        let o = run(
            "/usr/bin/python3",
            &["-c", "import socket; socket.socket()"],
            nobody,
            &dir,
        );
        assert!(o.status.success(), "nobody={nobody}: {o:?}");
    }
}
