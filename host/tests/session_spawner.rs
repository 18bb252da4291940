//! A session's spawner thread (docs/sessions.md, "How a command starts"): the resident's
//! thread holds the session's filter with exemptions for the calls that carry a per-session
//! secret, and every filtered command inherits that filter. A command must not be able to use
//! the exemptions: a `setsid` with a guessed secret is refused as the profile says, while the
//! real secret (read from the thread's filter by root, the control) passes; and the secret is
//! in the resident's memory (the control) but not in a command's after its exec.

mod common;

use common::{contained::text, sandbox, BOTH, PATH, SANDBOX};
use sandbox_host::exec::Request;
use sandbox_host::session::{Command, Session, SessionOptions};
use std::os::unix::fs::FileExt;
use std::process::Stdio;

/// A python3 command calling `setsid` with `value` in the argument the secret uses.
fn setsid_with(value: u64) -> String {
    format!(
        "import ctypes\nr = ctypes.CDLL(None).syscall(112, ctypes.c_uint64({value}))\nprint('ran', r)"
    )
}

/// The thread of `resident` that holds a filter (the spawner thread).
fn spawner_thread(resident: i32) -> i32 {
    std::fs::read_dir(format!("/proc/{resident}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/{resident}/task/{tid}/status"))
                .is_ok_and(|s| s.contains("Seccomp_filters:\t1"))
        })
        .expect("the resident's spawner thread")
}

/// The secret in the filter of thread `tid`, read as root with `PTRACE_SECCOMP_GET_FILTER`:
/// the 64-bit value its exemptions compare (a load of an argument's upper half, `jeq HI`, a
/// load of its lower half, `jeq LO`), the pair that recurs.
fn secret_of(tid: i32) -> u64 {
    const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;
    let null = std::ptr::null_mut::<libc::c_void>();
    // SAFETY: ptrace of a thread of a process this test started; the filter is copied into a
    // buffer of the size the kernel reported.
    let prog = unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_ATTACH, tid, null, null), 0);
        let mut status = 0;
        assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
        let n = libc::ptrace(PTRACE_SECCOMP_GET_FILTER, tid, null, null);
        assert!(n > 0, "{}", std::io::Error::last_os_error());
        let mut prog = vec![
            libc::sock_filter {
                code: 0,
                jt: 0,
                jf: 0,
                k: 0
            };
            n as usize
        ];
        libc::ptrace(PTRACE_SECCOMP_GET_FILTER, tid, null, prog.as_mut_ptr());
        libc::ptrace(libc::PTRACE_DETACH, tid, null, null);
        prog
    };
    let mut pairs: std::collections::HashMap<u64, usize> = Default::default();
    for w in prog.windows(4) {
        let ld = |i: &libc::sock_filter| i.code == 0x20;
        let jeq = |i: &libc::sock_filter| i.code == 0x15;
        if ld(&w[0]) && jeq(&w[1]) && ld(&w[2]) && jeq(&w[3]) && w[0].k == w[2].k + 4 && w[1].k != 0
        {
            *pairs
                .entry(u64::from(w[1].k) << 32 | u64::from(w[3].k))
                .or_default() += 1;
        }
    }
    pairs
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(s, _)| s)
        .expect("the exemptions' comparisons")
}

/// Whether `needle` is anywhere in the readable memory of `pid` (read as root).
fn memory_holds(pid: i32, needle: &[u8]) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next().unwrap(), f.next().unwrap());
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.read_exact_at(&mut buf, a).is_ok() && buf.windows(needle.len()).any(|w| w == needle)
        {
            return true;
        }
    }
    false
}

fn session(profile: &str, dir: &std::path::Path) -> Session {
    let mut r = Request::builder(["/bin/true"])
        .profile(profile)
        .cwd(dir.to_str().unwrap())
        .build();
    r.env.insert("PATH".into(), PATH.into());
    r.on_violation = sandbox_host::exec::OnViolation::Kill;
    Session::start(&r, &SessionOptions::new(SANDBOX)).expect("a session")
}

#[test]
fn a_guessed_secret_is_refused_and_the_secret_is_not_in_a_commands_memory() {
    let dir = tempfile::tempdir().unwrap();
    let s = session("minimal", dir.path());
    let sleeper = s.spawn(&Command::new(["/bin/sleep", "30"])).expect("sleep");
    // The resident of a session: the parent of its commands.
    let resident = common::parent_of(sleeper.pid());
    let secret = secret_of(spawner_thread(resident));
    // Control: the resident's memory holds the secret (its spawner thread uses it).
    assert!(memory_holds(resident, &secret.to_ne_bytes()));
    // A command's memory after its exec does not.
    assert!(!memory_holds(sleeper.pid(), &secret.to_ne_bytes()));
    sleeper.signal(libc::SIGKILL).unwrap();
    let _ = sleeper.wait();
    // Control: with the secret, `setsid` passes the filter (and then fails: the command leads
    // its process group already): the exemption is there, in the filter the command inherited.
    let r = s
        .spawn(&Command::new(["python3", "-c", &setsid_with(secret)]))
        .unwrap()
        .wait();
    assert_eq!(r.stdout, "ran -1\n", "{r:?}");
    assert!(r.violations.is_empty(), "{r:?}");
    // One bit off, it meets the profile: killed and named, in this command's result.
    let r = s
        .spawn(&Command::new(["python3", "-c", &setsid_with(secret ^ 1)]))
        .unwrap()
        .wait();
    assert_eq!(r.signal, Some(libc::SIGSYS), "{r:?}");
    assert_eq!(r.violation.as_ref().unwrap().syscall, "setsid", "{r:?}");
    // The next command has none of it.
    let r = s.spawn(&Command::new(["/bin/true"])).unwrap().wait();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.violations.is_empty() && r.violation.is_none(), "{r:?}");
    s.end();
}

/// As an agent runs it, root and uid 65534: a guess (uid 65534 cannot read the secret) is
/// refused and named on that command's stderr, not on the next one's.
#[test]
fn a_guessed_secret_is_refused_from_a_shell() {
    for who in BOTH {
        let dir = common::contained::owned_dir(who, "sess-spawner");
        let o = sandbox(who)
            .args(["session", "start", "--profile", "minimal"])
            .args(["--on-violation", "kill", "--workspace"])
            .arg(dir.path())
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let run = |argv: &[&str]| {
            sandbox(who)
                .args(["run", "--session", &id, "--"])
                .args(argv)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        };
        for guess in [0x0123_4567_89ab_cdef_u64, 1, u64::MAX] {
            let o = run(&["python3", "-c", &setsid_with(guess)]);
            assert_eq!(
                o.status.code(),
                Some(159),
                "{who:?} {guess:#x}: {}",
                text(&o)
            );
            assert!(
                String::from_utf8_lossy(&o.stderr).contains("setsid"),
                "{who:?}: {}",
                text(&o)
            );
        }
        let o = run(&["true"]);
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{who:?}: {}",
            text(&o)
        );
        let o = sandbox(who).args(["session", "end", &id]).output().unwrap();
        assert!(o.status.success(), "{who:?}: {}", text(&o));
    }
}

/// A background process whose command has ended is answered on the session's listener (its
/// refused call ends it, as the session's rules say) and named in no command's result; the
/// control: the same call from a running command is named in that command's result.
#[test]
fn a_background_process_left_by_an_ended_command_is_answered_and_named_in_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let s = session("shell", dir.path());
    let call = "python3 -c 'import socket; socket.socket(socket.AF_INET)'";
    let r = s
        .spawn(&Command::new([
            "bash",
            "-c",
            &format!("(sleep 0.5; {call} 2>/dev/null; echo $? > done) >/dev/null 2>&1 &"),
        ]))
        .unwrap()
        .wait();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.violations.is_empty(), "{r:?}");
    let done = dir.path().join("done");
    let t = std::time::Instant::now();
    while !done.exists() && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Killed by the session's rule (SIGSYS: 128 + 31) rather than left waiting.
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "159\n");
    let r = s.spawn(&Command::new(["/bin/true"])).unwrap().wait();
    assert!(r.violations.is_empty() && r.violation.is_none(), "{r:?}");
    // Control: from a running command, the call is that command's.
    let r = s.spawn(&Command::new(["bash", "-c", call])).unwrap().wait();
    assert_eq!(
        r.violation.as_ref().map(|v| v.syscall.as_str()),
        Some("socket"),
        "{r:?}"
    );
    s.end();
}
