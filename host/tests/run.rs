//! `sandbox run` end to end: exit statuses, admission refusals, requireSandbox both ways, the
//! GoClaw config (unknown keys, allowed and blocked commands), setuid programs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

fn sandbox(args: &[&str]) -> Output {
    // The tests run as root: `run` is told so, which keeps the root warning (tested in
    // cli.rs) off their stderr.
    let args: Vec<&str> = match args.split_first() {
        Some((&"run", rest)) => ["run", "--allow-root"]
            .iter()
            .chain(rest)
            .copied()
            .collect(),
        _ => args.to_vec(),
    };
    // The system temporary directory is the working directory, so the Landlock layer's
    // default workspace holds the temporary directories these tests write in.
    Command::new(SANDBOX)
        .args(args)
        .current_dir(std::env::temp_dir())
        .env_remove("SANDBOX_LOG")
        .output()
        .unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Compiles a C program with the machine's gcc (CI installs gcc-multilib and musl-tools).
fn cc(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let o = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .output()
        .expect("gcc is installed");
    assert!(
        o.status.success(),
        "gcc {flags:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

const TOUCH_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
    printf("created %d\n", fd >= 0);
    return 0;
}
"#;

#[test]
fn exit_status_zero_and_quiet() {
    let o = sandbox(&["run", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(err(&o), "", "nothing on stderr when all is well");
}

#[test]
fn exit_status_is_the_programs_own() {
    let o = sandbox(&["run", "--profile", "shell", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
}

#[test]
fn exit_status_is_128_plus_the_signal() {
    let o = sandbox(&[
        "run",
        "--profile",
        "shell",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    assert_eq!(o.status.code(), Some(128 + 15), "{}", err(&o));
}

#[test]
fn a_refused_call_is_reported_and_the_program_goes_on() {
    // By default the call fails with EPERM, the program handles it, and one line names the
    // call, its program, its count and the change that allows it.
    let script = "import socket\nfor i in range(3):\n  try: socket.socket()\n  except PermissionError: pass\nprint('after')";
    let o = sandbox(&["run", "--", "/usr/bin/python3", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "after\n");
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("was refused socket (41) 3 times"), "{e}");
    assert!(
        e.contains("profile minimal") && e.contains("--profile network"),
        "{e}"
    );
    // Control: `--on-violation kill` ends it at the first call, naming it.
    let o = sandbox(&[
        "run",
        "--on-violation",
        "kill",
        "--",
        "/usr/bin/python3",
        "-c",
        script,
    ]);
    assert_eq!(o.status.code(), Some(128 + 31), "{}", err(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("stopped by the filter: syscall socket (41)"),
        "{e}"
    );
}

#[test]
fn bad_on_violation_values_are_refused() {
    for bad in ["explode", "errno:ENOTANERRNO", ""] {
        let o = sandbox(&["run", "--on-violation", bad, "--", "/bin/true"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", err(&o));
    }
}

#[test]
fn trap_names_the_blocked_syscall() {
    let o = sandbox(&[
        "run",
        "--on-violation",
        "trap",
        "--",
        "/usr/bin/python3",
        "-c",
        "import socket; socket.socket()",
    ]);
    assert_eq!(o.status.code(), Some(128 + 31));
    assert!(
        err(&o).contains("syscall socket (41): socket is not allowed by profile minimal")
            && err(&o).contains("--profile network"),
        "{}",
        err(&o)
    );
}

#[test]
fn exit_status_125_when_the_sandbox_refuses() {
    let o = sandbox(&["run", "--profile", "no-such-profile", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("unknown profile `no-such-profile`"),
        "{}",
        err(&o)
    );
    let o = sandbox(&["run", "--allow", "read:bogus_call", "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("--allow `bogus_call`: unknown syscall"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("SECCOMP_"), "{}", err(&o));
    let o = sandbox(&[
        "run",
        "--profile",
        "shell",
        "--deny",
        "socket=EBOGUS",
        "--",
        "/bin/true",
    ]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("--deny `socket=EBOGUS`: unknown action"),
        "{}",
        err(&o)
    );
}

#[test]
fn exit_status_126_when_not_executable() {
    let o = sandbox(&["run", "--", "/etc/passwd"]);
    assert_eq!(o.status.code(), Some(126), "{}", err(&o));
}

#[test]
fn exit_status_127_when_not_found() {
    let o = sandbox(&["run", "--", "no-such-program-anywhere"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(err(&o).contains("command not found"), "{}", err(&o));
}

#[test]
fn timeout_kills_and_exits_124() {
    let t = std::time::Instant::now();
    let o = sandbox(&[
        "run",
        "--profile",
        "shell",
        "--timeout",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(o.status.code(), Some(124), "{}", err(&o));
    assert!(t.elapsed().as_secs() < 10);
    // One line, saying what happened and what to change.
    let stderr = err(&o);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("timed out after 1s") && lines[0].contains("raise --timeout"),
        "{lines:?}"
    );
}

#[test]
fn verbose_says_how_the_run_was_confined() {
    let o = sandbox(&["run", "-v", "--", "/bin/cat", "/etc/hostname"]);
    assert!(o.status.success());
    assert!(
        err(&o).contains("profile minimal, sandboxed: exact"),
        "{}",
        err(&o)
    );
}

#[test]
fn a_script_with_a_static_interpreter_is_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let interp = cc(
        dir.path(),
        "interp",
        "int main(void) { return 0; }\n",
        &["-static"],
    );
    let script = dir.path().join("script");
    std::fs::write(&script, format!("#!{}\n", interp.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = sandbox(&["run", "--", script.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(125));
    assert!(
        err(&o).contains("interp"),
        "names the interpreter: {}",
        err(&o)
    );
}

/// Runs `sandbox` itself under a filter that makes seccomp(2) fail with EINVAL, as on a kernel
/// without seccomp filters: the sandbox is unavailable.
fn sandbox_without_seccomp(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("libsandbox.so");
    std::fs::write(&so, sandbox_host::embedded::LIBSANDBOX).unwrap();
    Command::new(SANDBOX)
        .args(args)
        .current_dir(std::env::temp_dir())
        .env("LD_PRELOAD", &so)
        .env("SECCOMP_SYSCALL_DENY", "seccomp")
        .env("SECCOMP_DEFAULT_ACTION", "errno:EINVAL")
        .output()
        .unwrap()
}

#[test]
fn require_sandbox_refuses_when_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let o = sandbox_without_seccomp(&[
        "run",
        "--require-sandbox",
        "--",
        "/usr/bin/touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(
        err(&o).contains("sandbox required but unavailable"),
        "{}",
        err(&o)
    );
    assert!(!marker.exists());
}

#[test]
fn without_require_sandbox_it_warns_and_runs_unsandboxed() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    // Without the Landlock layer and the namespaces too (each would keep minimal read-only on
    // its own: the view seals the host's tree).
    let o = sandbox_without_seccomp(&[
        "run",
        "--landlock",
        "off",
        "--isolation",
        "off",
        "--",
        "/usr/bin/touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("unavailable") && err(&o).contains("unsandboxed"),
        "{}",
        err(&o)
    );
    assert!(
        marker.exists(),
        "minimal would have refused the write: it ran unsandboxed"
    );
}

fn config(dir: &Path, json: &str) -> PathBuf {
    let p = dir.join("config.json");
    std::fs::write(&p, json).unwrap();
    p
}

#[test]
fn config_with_unknown_keys_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        r#"{"tools":{"exec":{"sandbox":{"profile":"minimal","profil":"x"}}}}"#,
    );
    let o = sandbox(&["run", "--config", c.to_str().unwrap(), "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(err(&o).contains("unknown field `profil`"), "{}", err(&o));
    let c = config(dir.path(), r#"{"tools":{"exec":{"timeoutt":3}}}"#);
    let o = sandbox(&["run", "--config", c.to_str().unwrap(), "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(err(&o).contains("unknown field `timeoutt`"), "{}", err(&o));
}

#[test]
fn config_selects_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("f");
    let c = config(
        dir.path(),
        r#"{"tools":{"exec":{"sandbox":{"enabled":true,"profile":"write"}}}}"#,
    );
    let o = sandbox(&[
        "run",
        "--config",
        c.to_str().unwrap(),
        "--",
        "/usr/bin/touch",
        marker.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(marker.exists());
    let c = config(
        dir.path(),
        r#"{"sandbox":{"profile":"custom","customDeny":"uname","logViolations":false}}"#,
    );
    let o = sandbox(&["run", "--config", c.to_str().unwrap(), "--", "/bin/uname"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("refused uname"), "{}", err(&o));
}

#[test]
fn blocked_commands_match_resolved_paths() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "x").unwrap();
    let c = config(
        dir.path(),
        r#"{"tools":{"exec":{"blockedCommands":["rm"],"sandbox":{"profile":"write"}}}}"#,
    );
    let c = c.to_str().unwrap();
    for spelling in ["rm", "/usr/bin/../bin/rm", "/bin/rm"] {
        let o = sandbox(&[
            "run",
            "--config",
            c,
            "--",
            spelling,
            victim.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(125), "{spelling}: {}", err(&o));
        assert!(
            err(&o).contains("blockedCommands entry `rm`"),
            "{}",
            err(&o)
        );
        assert!(victim.exists(), "{spelling} must not run");
    }
    // A symlink under another name is the same program.
    let link = dir.path().join("innocent");
    std::os::unix::fs::symlink("/bin/rm", &link).unwrap();
    let o = sandbox(&[
        "run",
        "--config",
        c,
        "--",
        link.to_str().unwrap(),
        victim.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(125), "{}", err(&o));
    assert!(victim.exists());
}

#[test]
fn allowed_commands_admit_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        r#"{"tools":{"exec":{"allowedCommands":["cat"]}}}"#,
    );
    let c = c.to_str().unwrap();
    let o = sandbox(&["run", "--config", c, "--", "cat", "/etc/hostname"]);
    assert!(o.status.success(), "{}", err(&o));
    let o = sandbox(&["run", "--config", c, "--", "ls", "/"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(err(&o).contains("not in allowedCommands"), "{}", err(&o));
    assert_eq!(out(&o), "");
}

#[test]
fn disabled_exec_tool_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), r#"{"tools":{"exec":{"enabled":false}}}"#);
    let o = sandbox(&["run", "--config", c.to_str().unwrap(), "--", "/bin/true"]);
    assert_eq!(o.status.code(), Some(125));
}

const SUID_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>
int main(void) {
    struct utsname u;
    int r = uname(&u);
    printf("euid=%d uname=%s\n", (int)geteuid(), r == 0 ? "ok" : strerror(errno));
    return 0;
}
"#;

#[test]
fn a_setuid_root_program_run_by_an_unprivileged_user_stays_filtered() {
    let dir = tempfile::Builder::new().prefix("suid").tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = cc(dir.path(), "suid", SUID_C, &[]);
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the test runs as root so it can make a setuid-root file"
    );
    let p = prog.to_str().unwrap();
    let o = as_nobody(&[p], "");
    assert_eq!(
        out(&o),
        "euid=0 uname=ok\n",
        "unsandboxed, the setuid bit works: {}",
        err(&o)
    );
    let o = as_nobody(
        &[
            SANDBOX,
            "run",
            "--deny",
            "uname",
            "--on-violation",
            "errno",
            "--",
            p,
        ],
        "",
    );
    assert_eq!(
        out(&o),
        "euid=65534 uname=Operation not permitted\n",
        "{}",
        err(&o)
    );
}

#[test]
fn library_api_runs_a_command_through_the_engine() {
    use sandbox_host::exec::{self, OnViolation, Request};
    use sandbox_host::Sandboxed;
    let r = exec::exec(&Request::new(["/bin/cat", "/etc/hostname"])).unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(
        r.stdout,
        std::fs::read_to_string("/etc/hostname").unwrap(),
        "{r:?}"
    );
    assert_eq!(r.sandboxed.filter, Sandboxed::Exact);
    assert_eq!(r.sandboxed.profile, "minimal");
    let mut req = Request::new(["/usr/bin/python3", "-c", "import socket; socket.socket()"]);
    req.on_violation = OnViolation::Kill;
    let r = exec::exec(&req).unwrap();
    assert_eq!(r.signal, Some(libc::SIGSYS), "{r:?}");
    assert_eq!(
        r.violation.as_ref().map(|v| v.syscall.as_str()),
        Some("socket")
    );
    assert_eq!(r.sandboxed.filter, Sandboxed::Exact);
}

#[test]
fn env_prints_the_variables_for_other_languages() {
    // The filter's variables alone (SANDBOX_LANDLOCK spans lines: host/tests/preload_landlock.rs).
    let o = sandbox(&["env", "--profile", "network", "--landlock", "off"]);
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    // `export KEY='value'` lines; these values hold no quote.
    let vars: Vec<(&str, &str)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.strip_prefix("export ").unwrap().split_once('=').unwrap();
            (k, v.strip_prefix('\'').unwrap().strip_suffix('\'').unwrap())
        })
        .collect();
    let var = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let so = var("LD_PRELOAD").expect("LD_PRELOAD line");
    assert!(Path::new(so).is_file(), "{so}");
    assert!(
        var("SECCOMP_SYSCALL_ALLOW").unwrap().starts_with("@base:"),
        "{text}"
    );
    assert_eq!(var("SECCOMP_DEFAULT_ACTION"), Some("kill"), "{text}");
    // The printed variables confine a program started by hand.
    let mut cmd = Command::new("/bin/uname");
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    cmd.env("SECCOMP_SYSCALL_DENY", "uname");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(cmd.output().unwrap().status.signal(), Some(libc::SIGSYS));
    let o = sandbox(&["env", "--profile", "minimal", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["SECCOMP_SYSCALL_ALLOW"]
        .as_str()
        .unwrap()
        .starts_with("@base"));
}

#[test]
fn extract_check_profiles_and_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("libsandbox.so");
    let o = sandbox(&["extract", "--to", dest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        sandbox_host::embedded::LIBSANDBOX
    );

    let o = sandbox(&["check"]);
    assert!(o.status.success(), "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("ok    seccomp"), "{}", out(&o));

    let o = sandbox(&["profiles"]);
    for name in [
        "minimal",
        "network",
        "write",
        "no-exec",
        "shell",
        "unrestricted",
    ] {
        assert!(
            out(&o).lines().any(|l| l.starts_with(name)),
            "{name}: {}",
            out(&o)
        );
    }
    let o = sandbox(&["profiles", "show", "minimal"]);
    let text = out(&o);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("read").contains("allow") && line("read").contains("@fd-io"),
        "{}",
        line("read")
    );
    assert!(line("unlink").contains("errno:EROFS"), "{}", line("unlink"));
    assert!(
        line("ptrace").contains("kill") && line("ptrace").contains("@never"),
        "{}",
        line("ptrace")
    );

    let o = sandbox(&["inspect", "ls"]);
    assert!(out(&o).contains("the preload confines it"), "{}", out(&o));
    let prog = cc(
        dir.path(),
        "st",
        "int main(void){return 0;}\n",
        &["-static"],
    );
    let o = sandbox(&["inspect", prog.to_str().unwrap()]);
    assert!(out(&o).contains("statically linked"), "{}", out(&o));
}

const MPROTECT_C: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
int main(void) {
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("mprotect=%d\n", mprotect(p, 4096, PROT_READ));
    return 0;
}
"#;

#[test]
fn a_profile_without_the_loaders_calls_gets_the_preloads_exact_filter_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "mprotect", MPROTECT_C, &[]);
    let p = prog.to_str().unwrap();
    // No mprotect, arch_prctl, set_tid_address ...: the outer filter must exempt them for the
    // loader, so the preload stacks the exact list once start-up is done.
    let list = "read:write:exit_group:mmap:munmap:brk:fstat:newfstatat:futex:getrandom:close:lseek";
    let o = sandbox(&[
        "run",
        "-v",
        "--allow",
        list,
        "--on-violation",
        "errno",
        "--",
        p,
    ]);
    assert_eq!(
        out(&o),
        "mprotect=-1\n",
        "the exact filter refuses mprotect: {}",
        err(&o)
    );
    assert!(err(&o).contains("sandboxed: exact"), "{}", err(&o));
    // With mprotect listed it runs: the refusal above came from the list, not from breakage.
    let list = format!("{list}:mprotect");
    let o = sandbox(&["run", "--allow", &list, "--on-violation", "errno", "--", p]);
    assert_eq!(out(&o), "mprotect=0\n", "{}", err(&o));
}

/// Every kind of program a preload cannot enter: blocked by default with the reason named and
/// no side effect; `warn` runs it unconfined and says so; `allow` runs it silently.
#[test]
fn every_unconfinable_kind_is_blocked_by_default_and_runs_with_warn() {
    let dir = tempfile::tempdir().unwrap();
    let kinds: [(&str, &str, &[&str], &str); 4] = [
        ("static", "gcc", &["-static"], "statically linked"),
        ("static-pie", "gcc", &["-static-pie"], "static-pie"),
        ("musl", "musl-gcc", &[], "ld-musl"),
        ("m32", "gcc", &["-m32"], "32-bit"),
    ];
    for (name, compiler, flags, reason) in kinds {
        let src = dir.path().join(format!("{name}.c"));
        std::fs::write(&src, TOUCH_C).unwrap();
        let prog = dir.path().join(name);
        let built = Command::new(compiler)
            .args(flags)
            .arg("-o")
            .arg(&prog)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("{compiler} (gcc-multilib, musl-tools): {e}"));
        assert!(
            built.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let marker = dir.path().join(format!("{name}.made"));
        let (p, m) = (prog.to_str().unwrap(), marker.to_str().unwrap());

        let o = sandbox(&["run", "--profile", "write", "--", p, m]);
        assert_eq!(o.status.code(), Some(125), "{name}: {}", err(&o));
        assert!(
            err(&o).contains(reason),
            "{name}: the reason is named: {}",
            err(&o)
        );
        assert!(!marker.exists(), "{name}: blocked, so nothing was created");

        let o = sandbox(&[
            "run",
            "--profile",
            "write",
            "--static-binary",
            "warn",
            "--",
            p,
            m,
        ]);
        assert!(o.status.success(), "{name}: {}", err(&o));
        assert!(
            err(&o).contains("UNCONFINED") && err(&o).contains(reason),
            "{name}: {}",
            err(&o)
        );
        assert!(marker.exists(), "{name}: warn runs it");

        std::fs::remove_file(&marker).unwrap();
        let o = sandbox(&[
            "run",
            "--profile",
            "write",
            "--static-binary",
            "allow",
            "--",
            p,
            m,
        ]);
        assert!(o.status.success(), "{name}: {}", err(&o));
        assert_eq!(err(&o), "", "{name}: allow says nothing");
        assert!(marker.exists(), "{name}: allow runs it");
    }
}

/// Runs `args` as uid/gid 65534 with a home it cannot write (the preload goes to a temp dir).
fn as_nobody(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(args)
        .env("HOME", "/nonexistent")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("XDG_CACHE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_program_cannot_open_the_memory_of_the_sandbox_that_runs_it() {
    // Where Yama allows it (not loaded on this machine kind), a process can open the memory of
    // a same-uid parent: the address of the exempted execve and a spawner's secret are there,
    // and so is everything else of the host. `run` and `exec` make themselves non-dumpable.
    const SCRIPT: &str = "import os\n\
                          try:\n    open('/proc/%d/mem' % os.getppid(), 'rb'); print('opened')\n\
                          except OSError as e:\n    print('refused', e.errno)";
    let control = as_nobody(
        &["/bin/sh", "-c", "/usr/bin/python3 -c \"$0\"; :", SCRIPT],
        "",
    );
    assert_eq!(
        out(&control),
        "opened\n",
        "unsandboxed, a same-uid child opens its parent's memory: {}",
        err(&control)
    );
    let o = as_nobody(
        &[
            SANDBOX,
            "run",
            "--profile",
            "minimal",
            "--",
            "/usr/bin/python3",
            "-c",
            SCRIPT,
        ],
        "",
    );
    assert_eq!(out(&o), "refused 13\n", "{}", err(&o));
    let request = serde_json::json!({"argv": ["/usr/bin/python3", "-c", SCRIPT]}).to_string();
    let o = as_nobody(&[SANDBOX, "exec", "--json"], &request);
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(result["stdout"], "refused 13\n", "{result}");
}

#[test]
fn a_file_cut_at_the_callers_size_limit_is_said_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let run = |bytes: u32| {
        let script = format!(
            "ulimit -f 100; exec {SANDBOX} run --allow-root --profile shell -- sh -c 'head -c {bytes} /dev/zero > f{bytes}; echo ok'"
        );
        Command::new("/bin/bash")
            .args(["-c", &script])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // Control: under the limit (100 blocks of 1 KiB), quiet.
    let o = run(50_000);
    assert_eq!((o.status.code(), err(&o)), (Some(0), String::new()));
    let o = run(200_000);
    assert_eq!(o.status.code(), Some(0), "the shell goes on: {}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("sandbox: limit hit: fsize") && e.contains("f200000"),
        "{e}"
    );
}

/// `sandbox run ARGS` through `bash -c` as agents run commands: only PATH, HOME and LANG set,
/// stdin /dev/null; as uid 65534 when `nobody`.
fn as_agent(args: &str, nobody: bool) -> Output {
    let line = format!("{SANDBOX} run --allow-root {args} </dev/null");
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        c.arg("/bin/bash");
        c
    } else {
        Command::new("/bin/bash")
    };
    c.args(["-c", &line])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", if nobody { "/nonexistent" } else { "/root" })
        .env("LANG", "C.UTF-8")
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_shell_stopped_at_vfork_is_reported_as_the_filters_kill() {
    // dash blocks every signal around vfork, so SIGSYS cannot end it there: the host ends it
    // with SIGKILL and still reports the filter's kill (128 + 31) and the call.
    for nobody in [false, true] {
        let o = as_agent(
            "--profile minimal --on-violation kill -- /bin/sh -c '/bin/true; echo after'",
            nobody,
        );
        assert_eq!(
            o.status.code(),
            Some(128 + 31),
            "nobody={nobody}: {}",
            err(&o)
        );
        assert_eq!(out(&o), "", "nobody={nobody}");
        assert!(
            err(&o).contains("/usr/bin/dash was stopped by the filter: syscall vfork (58)"),
            "nobody={nobody}: {}",
            err(&o)
        );
        // Control: where vfork is allowed the same command runs through.
        let o = as_agent(
            "--profile shell --on-violation kill -- /bin/sh -c '/bin/true; echo after'",
            nobody,
        );
        assert_eq!(o.status.code(), Some(0), "nobody={nobody}: {}", err(&o));
        assert_eq!(out(&o), "after\n", "nobody={nobody}");
    }
}
