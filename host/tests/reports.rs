//! What the host reports cannot be forged by the job: a SIGSYS the program raised itself is
//! not reported as the filter's stop (only a refused call the kernel reported names the
//! filter), and a program's path with a newline or an escape sequence in it cannot add a line
//! of its own to the host's stderr. As root and as uid 65534, through `bash -c` as agents run
//! commands.

mod common;

use common::{command, As, BOTH, SANDBOX};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Raises SIGSYS itself, after writing what the preload's trap handler writes to the report
/// descriptor (3, where the host puts it) when the profile's exact filter is the preload's: a
/// forged `violation` line, then the signal with its default action back (the preload's
/// handler ignores a SIGSYS that does not come from seccomp).
const RAISE_C: &str = r#"
#include <signal.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    const char *line = "violation 101 ptrace\n";
    write(3, line, strlen(line));
    signal(SIGSYS, SIG_DFL);
    kill(getpid(), SIGSYS);
    return 0;
}
"#;

/// An allow list without the loader's calls (`mprotect`, `arch_prctl` ... are in it, but the
/// point is what is missing: `ptrace`, `socket`): the outer filter must exempt the loader's
/// calls, so the preload stacks the exact list and traps in its own handler, which reports on
/// descriptor 3 from inside the program's process.
const LIST: &str = "read:write:exit_group:mmap:munmap:brk:fstat:newfstatat:futex:getrandom:\
close:lseek:kill:getpid:openat:mprotect:pread64:arch_prctl:set_tid_address:set_robust_list:\
rseq:prlimit64:access:rt_sigaction";

/// Makes one call profile `shell` refuses (ptrace), then exits 0.
const REFUSED_C: &str = r#"
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
    syscall(SYS_ptrace, 0, 0, 0, 0);
    return 0;
}
"#;

/// Compiles `src` into `dir/name` with gcc, readable and runnable by everyone.
fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let o = Command::new("gcc")
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

/// A temporary directory uid 65534 may enter.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `sandbox run --allow-root ARGS -- PROGRAM` as `who`, through `bash -c`.
fn run(who: As, cwd: &Path, args: &[&str], program: &Path) -> Output {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = format!("{SANDBOX} run --allow-root");
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line.push_str(" -- ");
    line.push_str(&quote(program.to_str().unwrap()));
    command(who, "/bin/bash")
        .args(["-c", &line])
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_sigsys_the_program_raised_itself_is_not_the_filters_stop() {
    let dir = open_dir();
    let raise = cc(dir.path(), "raise", RAISE_C);
    let refused = cc(dir.path(), "refused", REFUSED_C);
    for who in BOTH {
        for mode in ["report", "kill"] {
            let o = run(
                who,
                dir.path(),
                &["--profile", "shell", "--on-violation", mode],
                &raise,
            );
            let e = err(&o);
            assert_eq!(o.status.code(), Some(128 + 31), "{who:?} {mode}: {e}");
            assert!(!e.contains("filter"), "{who:?} {mode}: {e}");
            assert!(!e.contains("ptrace"), "{who:?} {mode}: {e}");
            assert!(
                e.lines().any(|l| l
                    == format!(
                        "sandbox: {} was killed by signal 31 (SIGSYS)",
                        raise.display()
                    )),
                "{who:?} {mode}: {e}"
            );
        }
        // Where the preload stacks the exact filter, its report is the program's to write:
        // passed on as unconfirmed, the filter not named. (Root only: for uid 65534 a custom
        // list's run is refused before it starts on this machine, the child's handover of
        // the seccomp listener not permitted, a limit of that route and not of reports.)
        if who == As::Root {
            preload_route(dir.path(), &raise, &refused);
        }
        // Control: a call the outer filter refuses (a built-in profile, whose outer filter is
        // exact and reports through the kernel's notification), under `kill`, is the filter's
        // stop, named.
        let o = run(
            who,
            dir.path(),
            &["--profile", "shell", "--on-violation", "kill"],
            &refused,
        );
        let e = err(&o);
        assert_eq!(o.status.code(), Some(128 + 31), "{who:?}: {e}");
        assert!(
            e.contains(&format!(
                "{} was stopped by the filter: syscall ptrace (101)",
                refused.display()
            )),
            "{who:?}: {e}"
        );
        // The same through `exec --json`: no `violation` for the raised signal, the call for
        // the refused one.
        for (prog, named) in [(&raise, false), (&refused, true)] {
            let request = serde_json::json!({
                "argv": [prog],
                "profile": "shell",
                "on_violation": "kill",
                "cwd": dir.path(),
            });
            let o = common::output_with_input(
                command(who, SANDBOX).args(["exec", "--json"]),
                request.to_string().as_bytes(),
            );
            let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|_| panic!("{who:?}: {}", err(&o)));
            assert_eq!(v["signal"], 31, "{who:?}: {v}");
            if named {
                assert_eq!(v["violation"]["syscall"], "ptrace", "{who:?}: {v}");
            } else {
                assert!(v["violation"].is_null(), "{who:?}: {v}");
            }
        }
    }
}

/// The preload's own trap route (an allow list without the loader's calls), as root.
fn preload_route(dir: &Path, raise: &Path, refused: &Path) {
    let o = run(
        As::Root,
        dir,
        &["--allow", LIST, "--on-violation", "kill", "-v"],
        raise,
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(128 + 31), "{e}");
    assert!(e.contains("sandboxed: exact"), "{e}");
    assert!(!e.contains("stopped by the filter"), "{e}");
    assert!(e.contains("reported a refused call ptrace (101)"), "{e}");
    assert!(e.contains("the kernel did not confirm it"), "{e}");
    // On that route a call the preload's filter really refused looks the same to the host
    // (its trap outranks the outer filter's notification in the kernel): the same
    // unconfirmed report, which is why neither may name the filter.
    let o = run(
        As::Root,
        dir,
        &["--allow", LIST, "--on-violation", "kill"],
        refused,
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(128 + 31), "{e}");
    assert!(!e.contains("stopped by the filter"), "{e}");
    assert!(e.contains("reported a refused call ptrace (101)"), "{e}");
}

#[test]
fn a_path_with_a_newline_and_an_escape_sequence_makes_one_escaped_line() {
    let dir = open_dir();
    let name = "evil\nsandbox: all is well\x1b[2K";
    let sub = dir.path().join(name);
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = cc(&sub, "refused", REFUSED_C);
    // Control: the raw name holds the newline and the escape, and printed as it is it makes
    // two lines.
    let raw = refused.to_str().unwrap();
    assert!(raw.contains('\n') && raw.contains('\x1b'));
    assert_eq!(format!("sandbox: {raw} was refused").lines().count(), 2);
    let escaped = format!(
        "{}/evil\\nsandbox: all is well\\x1b[2K/refused",
        dir.path().display()
    );
    for who in BOTH {
        // The default (report): the call fails, the program goes on, one line names it.
        let o = run(who, dir.path(), &["--profile", "shell"], &refused);
        let e = err(&o);
        assert_eq!(o.status.code(), Some(0), "{who:?}: {e}");
        assert_eq!(e.lines().count(), 1, "{who:?}: {e:?}");
        assert!(!e.contains('\x1b'), "{who:?}: {e:?}");
        assert!(
            e.starts_with(&format!("sandbox: {escaped} was refused ptrace (101)")),
            "{who:?}: {e:?}"
        );
        // Under `kill`: one line, the filter's stop.
        let o = run(
            who,
            dir.path(),
            &["--profile", "shell", "--on-violation", "kill"],
            &refused,
        );
        let e = err(&o);
        assert_eq!(e.lines().count(), 1, "{who:?}: {e:?}");
        assert!(
            e.starts_with(&format!("sandbox: {escaped} was stopped by the filter")),
            "{who:?}: {e:?}"
        );
    }
}
