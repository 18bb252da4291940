//! `sandbox_host::exec`: real programs under real filters, with limits, timeouts, output caps,
//! whole-tree kills and violations. Tests that count the host's descriptors and zombies, or set
//! secrets in the host's environment, re-run themselves in a fresh process (`isolated`) so that
//! the other tests of this binary, running in parallel, cannot disturb them.

use sandbox_host::exec::{self, Containment, ExecResult, Request, RunOptions};
use sandbox_host::Sandboxed;
use std::process::Command;
use std::time::{Duration, Instant};

const PYTHON: &str = "/usr/bin/python3";

fn req(argv: &[&str]) -> Request {
    Request::new(argv.iter().copied())
}

/// A request whose refused calls end the program (`on_violation: "kill"`).
fn kreq(argv: &[&str]) -> Request {
    let mut r = req(argv);
    r.on_violation = exec::OnViolation::Kill;
    r
}

fn run(r: &Request) -> ExecResult {
    exec::exec(r).unwrap_or_else(|e| panic!("{:?} refused: {e}", r.argv))
}

fn refused(r: &Request) -> (String, String) {
    match exec::exec(r) {
        Ok(res) => panic!("{:?} ran: {res:?}", r.argv),
        Err(e) => (e.field().to_string(), e.reason()),
    }
}

/// Re-runs test `name` alone in a fresh process with `EXEC_ISOLATED=1` and `env` set, and
/// asserts that it passed. Returns true when called inside that process (the caller then
/// does the real work).
fn isolated(name: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os("EXEC_ISOLATED").is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env("EXEC_ISOLATED", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "isolated {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "isolated {name} did not run:\n{text}"
    );
    false
}

/// Processes (other than this one) whose environment contains `mark`.
fn marked(mark: &str) -> Vec<(i32, String)> {
    let needle = format!("EXEC_TEST_MARK={mark}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            found.push((pid, stat));
        }
    }
    found
}

/// Zombie processes whose parent is this process.
fn my_zombies() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut z = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        if f.first() == Some(&"Z") && f.get(1) == Some(&me.as_str()) {
            z.push(stat);
        }
    }
    z
}

/// Runs one request under each profile, so that what lives as long as the host (the sandbox
/// per profile, its spawner thread and listener) exists before descriptors are counted.
fn warm_up(profiles: &[&str]) {
    for p in profiles {
        let mut r = req(&["/bin/true"]);
        r.profile = p.to_string();
        run(&r);
    }
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

// ---- argv is not a command line; bad requests are refused ----

#[test]
fn metacharacters_are_not_interpreted() {
    let r = run(&req(&["/bin/echo", "; pwd"]));
    assert_eq!(r.stdout, "; pwd\n");
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.sandboxed.filter, Sandboxed::Exact);
    assert_eq!(r.sandboxed.profile, "minimal");
}

#[test]
fn refuses_empty_argv() {
    assert_eq!(refused(&req(&[])).0, "argv");
}

#[test]
fn refuses_empty_argument() {
    assert_eq!(refused(&req(&["/bin/echo", ""])).0, "argv[1]");
}

#[test]
fn refuses_relative_program() {
    let (field, reason) = refused(&req(&["bin/echo", "hi"]));
    assert_eq!(field, "argv[0]");
    assert!(reason.contains("absolute"), "{reason}");
}

#[test]
fn refuses_missing_program() {
    let (field, reason) = refused(&req(&["/nonexistent/program"]));
    assert_eq!(field, "argv[0]");
    assert!(reason.contains("does not exist"), "{reason}");
}

#[test]
fn refuses_directory_as_program() {
    let (field, reason) = refused(&req(&["/usr/bin"]));
    assert_eq!(field, "argv[0]");
    assert!(reason.contains("not a regular file"), "{reason}");
}

#[test]
fn refuses_relative_cwd() {
    let mut r = req(&["/bin/true"]);
    r.cwd = Some("tmp".into());
    assert_eq!(refused(&r).0, "cwd");
}

#[test]
fn refuses_missing_cwd() {
    let mut r = req(&["/bin/true"]);
    r.cwd = Some("/nonexistent/dir".into());
    assert_eq!(refused(&r).0, "cwd");
}

#[test]
fn refuses_file_as_cwd() {
    let mut r = req(&["/bin/true"]);
    r.cwd = Some("/bin/true".into());
    assert_eq!(refused(&r).0, "cwd");
}

#[test]
fn refuses_reserved_env_key() {
    let mut r = req(&["/bin/true"]);
    r.env.insert("_SECRET".into(), "x".into());
    let (field, reason) = refused(&r);
    assert_eq!(field, "env._SECRET");
    assert!(reason.contains("reserved"), "{reason}");
}

#[test]
fn refuses_nul_in_env_value() {
    let mut r = req(&["/bin/true"]);
    r.env.insert("FOO".into(), "a\0b".into());
    let (field, reason) = refused(&r);
    assert_eq!(field, "env.FOO");
    assert!(reason.contains("NUL"), "{reason}");
}

#[test]
fn refuses_code_injecting_env_keys() {
    for key in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "GCONV_PATH",
        "DYLD_INSERT_LIBRARIES",
        "DYLD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "RUBYOPT",
        "PERL5OPT",
        "PERL5LIB",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "PROMPT_COMMAND",
    ] {
        let mut r = req(&["/bin/true"]);
        r.env.insert(key.into(), "/tmp/evil".into());
        let (field, reason) = refused(&r);
        assert_eq!(field, format!("env.{key}"));
        assert!(reason.contains("extra code"), "{key}: {reason}");
    }
}

#[test]
fn refuses_timeout_out_of_range() {
    for t in [0.0, 0.5, 86_400.5, 86_401.0, f64::NAN, f64::INFINITY, -1.0] {
        let mut r = req(&["/bin/true"]);
        r.timeout_s = t;
        assert_eq!(refused(&r).0, "timeout_s", "{t}");
    }
}

#[test]
fn refuses_output_cap_out_of_range() {
    for m in [0, 1023, 4 * 1024 * 1024 + 1] {
        let mut r = req(&["/bin/true"]);
        r.max_output_bytes = m;
        assert_eq!(refused(&r).0, "max_output_bytes", "{m}");
    }
}

#[test]
fn refuses_unknown_profile() {
    let mut r = req(&["/bin/true"]);
    r.profile = "/etc/passwd".into();
    assert_eq!(refused(&r).0, "profile");
}

#[test]
fn refuses_bad_limits() {
    let mut r = req(&["/bin/true"]);
    r.limits.memory_bytes = Some(1024);
    assert_eq!(refused(&r).0, "limits.memory_bytes");
    let mut r = req(&["/bin/true"]);
    r.limits.nofile = Some(0);
    assert_eq!(refused(&r).0, "limits.nofile");
    let mut r = req(&["/bin/true"]);
    r.limits.cpu_seconds = Some(0);
    assert_eq!(refused(&r).0, "limits.cpu_seconds");
}

#[test]
fn env_scrub_drops_host_secrets() {
    if !isolated(
        "env_scrub_drops_host_secrets",
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("GITHUB_TOKEN", "ghp_secret"),
        ],
    ) {
        return;
    }
    assert_eq!(std::env::var("GITHUB_TOKEN").as_deref(), Ok("ghp_secret"));
    let mut r = req(&["/usr/bin/env"]);
    r.env.insert("FOO".into(), "bar".into());
    r.env.insert("PATH".into(), "/opt/bin:/usr/bin".into());
    // The private home: the persistent one adds its own variables (tests/home.rs).
    r.home = sandbox_host::exec::home::Mode::Private;
    let res = run(&r);
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    // The sandbox adds nothing: the filter is installed by the host (no LD_PRELOAD, no
    // SECCOMP_* variables).
    // TMPDIR, when there is one, is the request's private temporary directory (a fresh name
    // each time; none under a profile that may create no file).
    let mut lines: Vec<&str> = res
        .stdout
        .lines()
        .filter(|l| !l.starts_with("TMPDIR=/tmp/sandbox-tmp-") && *l != "TMPDIR=/tmp")
        .collect();
    assert!(
        lines.len() + 1 >= res.stdout.lines().count(),
        "{}",
        res.stdout
    );
    lines.sort();
    let user = sandbox_host::exec::env::user();
    let mut want = vec![
        "FOO=bar".to_string(),
        "HOME=/tmp".into(),
        "LANG=C.UTF-8".into(),
        "LC_ALL=C.UTF-8".into(),
        "PATH=/opt/bin:/usr/bin".into(),
        "SHELL=/bin/sh".into(),
        "TERM=dumb".into(),
        format!("USER={user}"),
    ];
    // The package managers' copy modes (docs/isolation.md, "Hard links").
    want.extend(
        sandbox_host::exec::env::COPY_MODES
            .iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    // Root's tar keeps its own ownership (docs/exec.md, "The environment").
    if sandbox_host::exec::env::user() == "root" {
        let (k, v) = sandbox_host::exec::env::ROOT_TAR;
        want.push(format!("{k}={v}"));
    }
    want.sort();
    assert_eq!(
        lines, want,
        "the child saw exactly the safe list plus the request's additions"
    );
    for secret in ["sk-ant-secret", "aws-secret", "ghp_secret"] {
        assert!(!res.stdout.contains(secret));
    }
}

#[test]
fn timeout_returns_timed_out_quickly() {
    let mut r = req(&["/bin/sleep", "10"]);
    r.timeout_s = 1.0;
    let t = Instant::now();
    let res = run(&r);
    let took = t.elapsed();
    assert!(res.timed_out, "{res:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        res.signal,
        Some(libc::SIGTERM),
        "sleep dies of the SIGTERM: {res:?}"
    );
    assert!(res.violation.is_none());
}

#[test]
fn timeout_escalates_to_sigkill_after_grace() {
    let mut r = req(&["/bin/sh", "-c", "trap '' TERM; sleep 10"]);
    r.profile = "shell".into();
    r.timeout_s = 1.0;
    let opts = RunOptions {
        grace: Duration::from_millis(300),
        ..RunOptions::default()
    };
    let t = Instant::now();
    let res = exec::exec_with(&r, &opts).unwrap();
    assert!(res.timed_out);
    assert_eq!(res.signal, Some(libc::SIGKILL), "{res:?}");
    assert!(t.elapsed() < Duration::from_secs(4));
}

#[test]
fn output_cap_truncates_one_megabyte() {
    let mut r = req(&["/usr/bin/head", "-c", "1048576", "/dev/zero"]);
    r.max_output_bytes = 1024;
    let res = run(&r);
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert!(res.stdout.len() <= 1024, "{}", res.stdout.len());
    assert_eq!(res.stdout.len(), 1024);
    assert!(res.stdout_truncated);
    assert!(!res.stderr_truncated);
}

#[test]
fn output_cap_never_splits_a_character() {
    // 600 two-byte characters: the 1024-byte cap falls on a character boundary after 512;
    // with one leading ASCII byte it falls inside one.
    let mut r = req(&[
        PYTHON,
        "-c",
        "import sys; sys.stdout.write('a' + '\u{e9}' * 600)",
    ]);
    r.max_output_bytes = 1024;
    let res = run(&r);
    assert!(res.stdout_truncated, "{res:?}");
    assert!(res.stdout.len() <= 1024);
    assert!(res.stdout.starts_with("a\u{e9}"));
    assert!(
        !res.stdout.contains('\u{fffd}'),
        "no replacement character for the cut"
    );
}

#[test]
fn invalid_utf8_is_replaced() {
    let res = run(&req(&["/usr/bin/printf", "ok\\377\\n"]));
    assert_eq!(res.stdout, "ok\u{fffd}\n");
}

#[test]
fn stdin_text_reaches_the_program() {
    let mut r = req(&["/bin/cat"]);
    r.stdin = Some("hello\nworld\n".into());
    let res = run(&r);
    assert_eq!(res.stdout, "hello\nworld\n", "{res:?}");
    assert_eq!(res.exit_code, Some(0));
}

#[test]
fn no_stdin_reads_eof() {
    let res = run(&req(&["/bin/cat"]));
    assert_eq!(res.stdout, "");
    assert_eq!(res.exit_code, Some(0));
}

#[test]
fn exit_status_and_cwd() {
    let mut r = req(&["/bin/sh", "-c", "pwd; exit 7"]);
    r.profile = "shell".into();
    r.cwd = Some("/usr".into());
    let res = run(&r);
    assert_eq!(res.exit_code, Some(7));
    assert_eq!(res.signal, None);
    assert_eq!(res.stdout, "/usr\n");
}

#[test]
fn resource_limits_apply() {
    // The memory limit is the request cgroup's where the caller has one (v1 memory, or cgroup
    // v2 `memory.max`; root here), printed in KiB; without one it is the host's watchdog, which
    // nothing inside the job shows (and never RLIMIT_AS, checked first).
    let memory = r#"m=$(ulimit -v); if [ "$m" = unlimited ]; then
        p=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
        v=$(sed -n 's/^0:://p' /proc/self/cgroup)
        for f in "/sys/fs/cgroup/memory$p/memory.limit_in_bytes" "/sys/fs/cgroup$v/memory.max" \
            "/sys/fs/cgroup/unified$v/memory.max"; do
            [ -r "$f" ] && { m=$(( $(cat "$f") / 1024 )); break; }
        done
    fi; echo $m"#;
    let script = format!("ulimit -t; {memory}; ulimit -f; ulimit -n; ulimit -c");
    let mut r = req(&["/bin/sh", "-c", &script]);
    r.profile = "shell".into();
    r.timeout_s = 30.0;
    let res = run(&r);
    // sh reports -v and -f in KiB and 512-byte blocks respectively. The descriptor limit is
    // the caller's own (this test's), within 4096 and 65536, at most its hard limit.
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct passed.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) }, 0);
    let nofile = own.rlim_cur.clamp(4096, 65536).min(own.rlim_max);
    assert_eq!(
        res.stdout,
        format!("30\n524288\n131072\n{nofile}\n0\n"),
        "{res:?}"
    );

    r.limits.nofile = Some(64);
    r.limits.memory_bytes = Some(256 * 1024 * 1024);
    r.limits.cpu_seconds = Some(5);
    r.limits.fsize_bytes = Some(1024 * 1024);
    let res = run(&r);
    assert_eq!(res.stdout, "5\n262144\n2048\n64\n0\n", "{res:?}");
}

#[test]
fn a_program_refused_a_descriptor_is_named_with_the_field_that_raises_it() {
    let script = "fs = []\ntry:\n    while True: fs.append(open('/dev/null'))\nexcept OSError as e:\n    print(len(fs) + 3, e)";
    let mut r = req(&[PYTHON, "-c", script]);
    r.profile = "shell".into();
    r.limits.nofile = Some(64);
    let res = run(&r);
    assert!(res.stdout.contains("Too many open files"), "{res:?}");
    assert!(res.limits_hit.contains(&"nofile".to_string()), "{res:?}");
    assert!(
        res.warnings.iter().any(|w| w.contains("limit hit: nofile")
            && w.contains("at the limit of 64 open files")
            && w.contains("raise limits.nofile")),
        "{res:?}"
    );
    // Control: a program that opens a few files under the same limit hits nothing.
    let mut r = req(&[PYTHON, "-c", "fs = [open('/dev/null') for _ in range(20)]"]);
    r.profile = "shell".into();
    r.limits.nofile = Some(64);
    let res = run(&r);
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert!(res.limits_hit.is_empty(), "{res:?}");
}

#[test]
fn fsize_limit_stops_big_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = req(&[
        "/bin/sh",
        "-c",
        "head -c 2000000 /dev/zero > big; echo $?; wc -c < big",
    ]);
    r.profile = "shell".into();
    r.cwd = Some(dir.path().to_str().unwrap().into());
    r.limits.fsize_bytes = Some(1_000_000);
    let res = run(&r);
    let lines: Vec<&str> = res.stdout.lines().collect();
    assert_ne!(lines.first(), Some(&"0"), "{res:?}");
    assert_eq!(lines.last(), Some(&"1000000"), "{res:?}");
}

#[test]
fn runs_in_a_new_session() {
    let mut r = req(&[
        PYTHON,
        "-c",
        "import os; print(os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())",
    ]);
    r.profile = "shell".into();
    let res = run(&r);
    assert_eq!(res.stdout, "True True\n", "{res:?}");
}

// ---- whole-tree kill ----

/// How a tree test runs: in the request's own namespaces (the PID namespace's init ends the
/// tree) or with none at all, the network's included (the cgroup or the subreaper's walk
/// does).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Isolation {
    Namespaces,
    Off,
}

fn setsid_tree_is_killed(containment: Containment, isolation: Isolation) {
    let mark = unique("setsid");
    let mut r = req(&["/bin/sh", "-c", "setsid sleep 300 & sleep 300"]);
    r.profile = "shell".into();
    if isolation == Isolation::Off {
        r.isolation = exec::isolation::Mode::Off;
        r.network = Some(sandbox_host::network::Mode::Host);
    }
    r.timeout_s = 1.0;
    r.env.insert("EXEC_TEST_MARK".into(), mark.clone());
    let opts = RunOptions {
        grace: Duration::from_millis(200),
        containment,
        ..RunOptions::default()
    };
    let t = Instant::now();
    let res = exec::exec_with(&r, &opts).unwrap();
    assert!(res.timed_out, "{res:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(
        marked(&mark),
        vec![],
        "processes of the request are still alive"
    );
}

/// A cancelled request ends at once with its whole tree (setsid descendants included), long
/// before its timeout; a control request with the same handle uncancelled runs to completion.
#[test]
fn cancel_kills_the_tree() {
    let mark = unique("cancel");
    let mut r = req(&["/bin/sh", "-c", "setsid sleep 300 & sleep 300"]);
    r.profile = "shell".into();
    r.timeout_s = 60.0;
    r.env.insert("EXEC_TEST_MARK".into(), mark.clone());
    let cancel = exec::Cancel::new().unwrap();
    let opts = RunOptions {
        cancel: Some(cancel.clone()),
        ..RunOptions::default()
    };
    let ok = exec::exec_with(&req(&["/bin/echo", "control"]), &opts).unwrap();
    assert!(!ok.cancelled && ok.stdout == "control\n", "{ok:?}");
    let t = Instant::now();
    let worker = std::thread::spawn(move || exec::exec_with(&r, &opts).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marked(&mark).is_empty(), "the request's processes started");
    cancel.cancel();
    let res = worker.join().unwrap();
    assert!(res.cancelled && !res.timed_out, "{res:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(
        marked(&mark),
        vec![],
        "processes of the request are still alive"
    );
}

/// A process limit asked for explicitly is enforced (forks beyond it fail) or, on a machine
/// whose request cgroups have no pids controller, the request is refused naming the field:
/// never run without it. Hostile values are refused.
#[test]
fn an_explicit_process_limit_is_enforced_or_refused() {
    let script = "n=0; for i in $(seq 40); do sleep 5 & n=$((n+1)); done 2>/dev/null; \
                  echo started; kill $(jobs -p) 2>/dev/null";
    let mut r = req(&["/bin/bash", "-c", script]);
    r.profile = "shell".into();
    r.limits.processes = Some(8);
    match exec::exec(&r) {
        Ok(res) => {
            // bash gives up when a fork fails (its message goes to /dev/null here); a pids
            // cgroup names the limit in the result.
            assert!(
                res.stdout != "started\n"
                    || res.stderr.contains("Resource temporarily unavailable")
                    || res.stderr.contains("fork"),
                "forks beyond the limit fail: {res:?}"
            );
            let named = res.limits_hit.iter().any(|h| h == "processes");
            // Control: without the explicit limit (default 1024) the same script forks freely.
            r.limits.processes = None;
            let res = run(&r);
            assert!(!res.stderr.contains("fork"), "{res:?}");
            assert_eq!(res.stdout, "started\n", "{res:?}");
            if named {
                assert!(res.limits_hit.is_empty(), "{res:?}");
            }
        }
        Err(e) => {
            assert_eq!(e.field(), "limits.processes", "{e}");
            assert!(e.reason().contains("pids controller"), "{e}");
        }
    }
    for bad in [0, 1 << 20] {
        r.limits.processes = Some(bad);
        assert_eq!(refused(&r).0, "limits.processes");
    }
}

/// The cgroup v2 directory this test process is in, when cgroup v2 is mounted.
fn own_cgroup_dir() -> Option<std::path::PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split(' ').next()? == "cgroup2").then(|| pre.split(' ').nth(4).map(String::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
    Some(std::path::Path::new(&mount).join(rel.trim_start_matches('/')))
}

/// As root a request can move itself out of its request cgroup (the cgroup kill then misses
/// it): the timeout still ends it, through its pidfd. Control: the move itself works.
#[test]
fn timeout_holds_for_a_program_that_left_its_cgroup() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (moving between cgroups)");
        return;
    }
    let Some(dir) = own_cgroup_dir() else {
        eprintln!("skipped: no cgroup v2");
        return;
    };
    let procs = dir.join("cgroup.procs");
    let mark = unique("escape-cgroup");
    let script = format!(
        "echo $$ > {} && grep -q '^0::' /proc/self/cgroup && echo moved; exec sleep 300",
        procs.display()
    );
    let mut r = req(&["/bin/sh", "-c", &script]);
    r.profile = "shell".into();
    r.timeout_s = 1.0;
    r.env.insert("EXEC_TEST_MARK".into(), mark.clone());
    // Landlock and the constructed view (the host's tree read-only) each refuse the write to
    // cgroup.procs: this test is about the timeout, so it runs without those layers.
    r.landlock = sandbox_host::landlock::Mode::Off;
    r.isolation = sandbox_host::exec::isolation::Mode::Off;
    let opts = RunOptions {
        grace: Duration::from_millis(200),
        ..RunOptions::default()
    };
    let t = Instant::now();
    let res = exec::exec_with(&r, &opts).unwrap();
    assert_eq!(
        res.stdout, "moved\n",
        "the program left its cgroup: {res:?}"
    );
    assert!(res.timed_out, "{res:?}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(marked(&mark), vec![], "the program is still alive");
}

#[test]
fn timeout_kills_setsid_descendants_pid_namespace() {
    setsid_tree_is_killed(Containment::Auto, Isolation::Namespaces);
}

#[test]
fn timeout_kills_setsid_descendants_cgroup() {
    setsid_tree_is_killed(Containment::Auto, Isolation::Off);
}

#[test]
fn timeout_kills_setsid_descendants_subreaper() {
    setsid_tree_is_killed(Containment::Subreaper, Isolation::Off);
}

fn background_job_is_killed(containment: Containment, isolation: Isolation) {
    let mark = unique("bg");
    // In the request's PID namespace, a double fork in a session of its own (the sleeper's
    // parent is gone before the request ends: its init ends it all the same); without
    // namespaces, where an unprivileged caller has the subreaper's walk, which cannot
    // recognise that one (its documented limit), a plain background job.
    let script = if isolation == Isolation::Namespaces {
        "(setsid sleep 300 &); echo started"
    } else {
        "sleep 300 & echo started"
    };
    let mut r = req(&["/bin/sh", "-c", script]);
    r.profile = "shell".into();
    if isolation == Isolation::Off {
        r.isolation = exec::isolation::Mode::Off;
        r.network = Some(sandbox_host::network::Mode::Host);
    }
    r.env.insert("EXEC_TEST_MARK".into(), mark.clone());
    let opts = RunOptions {
        containment,
        ..RunOptions::default()
    };
    let t = Instant::now();
    let res = exec::exec_with(&r, &opts).unwrap();
    assert_eq!(res.stdout, "started\n");
    assert_eq!(res.exit_code, Some(0));
    assert!(!res.timed_out);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(
        marked(&mark),
        vec![],
        "the background job outlived the request"
    );
}

#[test]
fn normal_exit_kills_background_jobs_pid_namespace() {
    background_job_is_killed(Containment::Auto, Isolation::Namespaces);
}

#[test]
fn normal_exit_kills_background_jobs_cgroup() {
    background_job_is_killed(Containment::Auto, Isolation::Off);
}

#[test]
fn normal_exit_kills_background_jobs_subreaper() {
    background_job_is_killed(Containment::Subreaper, Isolation::Off);
}

#[test]
fn no_orphan_zombies_after_a_tree_run() {
    if !isolated("no_orphan_zombies_after_a_tree_run", &[]) {
        return;
    }
    // Warm up: the shell profile's spawner thread holds its listener for the host's lifetime.
    warm_up(&["shell"]);
    for containment in [Containment::Auto, Containment::Subreaper] {
        let before = fd_count();
        // A grandchild that exits on its own after its parent did: an orphan the host adopts.
        let mut r = req(&[
            "/bin/sh",
            "-c",
            "(sleep 0.2 &); setsid sh -c 'sleep 0.1' & sleep 0.5; echo done",
        ]);
        r.profile = "shell".into();
        let res = exec::exec_with(
            &r,
            &RunOptions {
                containment,
                ..RunOptions::default()
            },
        )
        .unwrap();
        assert_eq!(res.stdout, "done\n", "{res:?}");
        assert_eq!(my_zombies(), Vec::<String>::new(), "{containment:?}");
        assert_eq!(fd_count(), before, "{containment:?}");
    }
}

// ---- output ----

#[test]
fn hundred_megabytes_on_stderr_does_not_deadlock() {
    let mut r = req(&["/bin/sh", "-c", "head -c 100000000 /dev/zero >&2; echo end"]);
    r.profile = "shell".into();
    r.timeout_s = 60.0;
    let t = Instant::now();
    let res = run(&r);
    assert!(!res.timed_out, "{:?}", t.elapsed());
    assert_eq!(res.exit_code, Some(0));
    assert_eq!(res.stdout, "end\n");
    assert!(res.stderr_truncated);
    assert_eq!(res.stderr.len(), 256 * 1024);
}

#[test]
fn both_streams_full_do_not_deadlock() {
    let mut r = req(&[PYTHON, "-c", "import sys\nfor i in range(2000):\n  sys.stdout.write('o'*1000); sys.stderr.write('e'*1000)"]);
    r.max_output_bytes = 4 * 1024 * 1024;
    let res = run(&r);
    assert_eq!(res.exit_code, Some(0), "{:?}", res.stderr.get(..200));
    assert_eq!(res.stdout.len(), 2_000_000);
    assert_eq!(res.stderr.len(), 2_000_000);
    assert!(!res.stdout_truncated && !res.stderr_truncated);
}

// ---- concurrency, descriptors, zombies ----

#[test]
fn two_hundred_concurrent_requests() {
    if !isolated("two_hundred_concurrent_requests", &[]) {
        return;
    }
    // Warm up the caches (sandbox per profile, extracted preload, cgroup detection, and each
    // profile's spawner thread with its listener, held for the host's lifetime).
    warm_up(&["minimal", "shell"]);
    let before = fd_count();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= 200 {
                    break;
                }
                let arg = format!("request {i}");
                let (argv, profile): (Vec<&str>, &str) = match i % 4 {
                    0 => (vec!["/bin/echo", &arg], "minimal"),
                    1 => (
                        vec!["/bin/sh", "-c", "echo \"$0\"; sleep 0.05 &", &arg],
                        "shell",
                    ),
                    2 => (
                        vec![PYTHON, "-c", "import sys; print(sys.argv[1])", &arg],
                        "minimal",
                    ),
                    _ => (vec!["/bin/sh", "-c", "echo \"$0\"; exit 3", &arg], "shell"),
                };
                let mut r = req(&argv);
                r.profile = profile.into();
                let res = run(&r);
                assert_eq!(res.stdout, format!("{arg}\n"), "{res:?}");
                assert_eq!(
                    res.exit_code,
                    Some(if i % 4 == 3 { 3 } else { 0 }),
                    "{res:?}"
                );
                assert_eq!(res.sandboxed.filter, Sandboxed::Exact);
            });
        }
    });
    assert_eq!(fd_count(), before, "descriptors leaked");
    assert_eq!(my_zombies(), Vec::<String>::new(), "zombies left");
}

// ---- violations ----

#[test]
fn violation_names_socket_under_minimal() {
    let res = run(&kreq(&[PYTHON, "-c", "import socket; socket.socket()"]));
    assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
    let v = res.violation.expect("a violation");
    assert_eq!(v.syscall, "socket");
    assert_eq!(
        v.number,
        sandbox_host::policy::NATIVE.syscall_number("socket")
    );
    assert_eq!(v.profile, "minimal");
    assert!(
        v.hint.contains("socket is not allowed by profile minimal"),
        "{}",
        v.hint
    );
    // The one call first, with the mode that keeps the run without network; then minimal
    // plus the socket's group (@network), the network profile.
    assert!(v.hint.contains("@network"), "{}", v.hint);
    assert!(v.hint.contains("\"profile\": \"network\""), "{}", v.hint);
    assert_eq!(
        v.change.as_deref(),
        Some("\"allow\": [\"socket\"], \"network\": \"none\"")
    );
    assert!(!v.hint.contains('\n'));
}

#[test]
fn fake_violation_lines_on_stderr_do_not_fool_it() {
    let script = "import sys\n\
                  sys.stderr.write('libsandbox: blocked syscall socket (41)\\n')\n\
                  sys.stderr.write('violation 41 socket\\n')\n\
                  sys.stdout.write('violation 41 socket\\n')\n";
    let res = run(&kreq(&[PYTHON, "-c", script]));
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert!(res.violation.is_none(), "{res:?}");
    assert!(res.stderr.contains("blocked syscall socket"));
}

#[test]
fn fake_line_then_real_violation_reports_the_real_call() {
    let script = "import sys, os\n\
                  sys.stderr.write('libsandbox: blocked syscall ptrace (101)\\n'); sys.stderr.flush()\n\
                  os.fork()\n";
    let res = run(&kreq(&[PYTHON, "-c", script]));
    let v = res.violation.expect("a violation");
    assert_ne!(v.syscall, "ptrace");
    assert!(
        ["fork", "clone", "clone3", "vfork"].contains(&v.syscall.as_str()),
        "{v:?}"
    );
    assert!(v.hint.contains("\"allow\": ["), "{}", v.hint);
}

#[test]
fn no_violation_when_a_program_dies_of_another_signal() {
    let mut r = kreq(&["/bin/sh", "-c", "kill -SEGV $$"]);
    r.profile = "shell".into();
    let res = run(&r);
    assert_eq!(res.signal, Some(libc::SIGSEGV));
    assert!(res.violation.is_none());
}

#[test]
fn unrestricted_runs_without_filter() {
    let mut r = kreq(&["/bin/echo", "free"]);
    r.profile = "unrestricted".into();
    let res = run(&r);
    assert_eq!(res.stdout, "free\n");
    assert_eq!(res.sandboxed.filter, Sandboxed::None);
    assert_eq!(res.sandboxed.profile, "unrestricted");
}

#[test]
fn result_serializes_with_the_documented_fields() {
    let res = run(&kreq(&["/bin/echo", "x"]));
    let v = serde_json::to_value(&res).unwrap();
    let obj = v.as_object().unwrap();
    for k in [
        "exit_code",
        "signal",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "duration_s",
        "timed_out",
        "violation",
        "sandboxed",
        "warnings",
    ] {
        assert!(obj.contains_key(k), "missing {k}");
    }
    assert_eq!(
        v["sandboxed"],
        serde_json::json!({"filter": "exact", "profile": "minimal"})
    );
}

// ---- violations through the filter's listener ----

#[test]
fn violation_in_a_descendant_is_named() {
    // The shell runs on; its child dies of SIGSYS (128 + 31 = 159).
    let mut r = kreq(&[
        "/bin/sh",
        "-c",
        &format!("{PYTHON} -c 'import socket; socket.socket()'; echo after $?"),
    ]);
    r.profile = "shell".into();
    let res = run(&r);
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert_eq!(res.stdout, "after 159\n");
    let v = res.violation.expect("a violation");
    assert_eq!(v.syscall, "socket");
    assert_eq!(v.profile, "shell");
}

#[test]
fn a_program_that_ignores_catches_or_blocks_sigsys_is_still_stopped() {
    for setup in [
        "signal.signal(signal.SIGSYS, signal.SIG_IGN)",
        "signal.signal(signal.SIGSYS, lambda *a: print('handler ran'))",
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGSYS])",
    ] {
        let script = format!("import signal, socket\n{setup}\nsocket.socket()\nprint('survived')");
        let res = run(&kreq(&[PYTHON, "-c", &script]));
        // Ended with SIGKILL, reported as the filter's kill.
        assert_eq!(res.signal, Some(libc::SIGSYS), "{setup}: {res:?}");
        assert_eq!(res.stdout, "", "{setup}: the call never returned");
        assert_eq!(
            res.violation.as_ref().map(|v| v.syscall.as_str()),
            Some("socket"),
            "{setup}"
        );
    }
}

#[test]
fn the_program_holds_no_descriptor_of_the_host() {
    // Not the filter's listener, the spawn pipes, the cgroup directory or anything else: only
    // its standard streams (3 is the directory listdir opens).
    let res = run(&kreq(&[
        PYTHON,
        "-c",
        "import os; print(sorted(os.listdir('/proc/self/fd')))",
    ]));
    assert_eq!(res.stdout, "['0', '1', '2', '3']\n", "{res:?}");
}

#[test]
fn a_static_program_confined_by_the_outer_filter_has_its_violation_named() {
    let dir = tempfile::tempdir().unwrap();
    let prog = sandbox_tests::compile_c(
        dir.path(),
        "static_socket",
        "#include <stdio.h>\n#include <sys/socket.h>\n\
         int main(void) { puts(\"before\"); fflush(stdout);\n\
         socket(AF_INET, SOCK_STREAM, 0); puts(\"after\"); return 0; }\n",
        sandbox_tests::Build::Static,
    );
    let mut r = kreq(&[prog.to_str().unwrap()]);
    r.static_binary = sandbox_host::StaticBinaryAction::Confine;
    let res = run(&r);
    assert_eq!(res.stdout, "before\n", "{res:?}");
    assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
    assert_eq!(res.sandboxed.filter, Sandboxed::Exact);
    assert_eq!(res.violation.expect("a violation").syscall, "socket");
    // Blocked by default: the preload cannot enter it (the request asks for `confine`).
    let (field, reason) = refused(&kreq(&[prog.to_str().unwrap()]));
    assert_eq!(field, "argv[0]");
    assert!(reason.contains("static"), "{reason}");
}

#[test]
fn exec_failure_is_reported_as_a_refusal_of_argv0() {
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("garbage");
    sandbox_tests::write_executable(&prog, "\x01\x02 not a program\n");
    let mut r = kreq(&[prog.to_str().unwrap()]);
    r.static_binary = sandbox_host::StaticBinaryAction::Allow;
    let (field, reason) = refused(&r);
    assert_eq!(field, "argv[0]");
    assert!(reason.contains("format"), "{reason}");
}

#[test]
fn requests_after_one_whose_leftovers_were_killed_run_normally() {
    // The first request leaves a background job, killed with cgroup.kill; a cgroup once killed
    // must not be reused (this kernel kills children cloned into it).
    let mut r = kreq(&["/bin/sh", "-c", "sleep 30 & echo started"]);
    r.profile = "shell".into();
    for _ in 0..3 {
        let opts = RunOptions {
            containment: Containment::Cgroup,
            ..RunOptions::default()
        };
        let res = exec::exec_with(&r, &opts).unwrap();
        assert_eq!(res.stdout, "started\n", "{res:?}");
        for _ in 0..5 {
            let res = exec::exec_with(&kreq(&["/bin/echo", "ok"]), &opts).unwrap();
            assert_eq!(
                (res.exit_code, res.stdout.as_str()),
                (Some(0), "ok\n"),
                "{res:?}"
            );
        }
    }
}

// ---- the spawner thread ----

/// `Seccomp:` of each thread of this process whose name starts with `prefix`.
fn thread_seccomp(prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap();
            let line = status.lines().find(|l| l.starts_with("Seccomp:")).unwrap();
            found.push(line.to_string());
        }
    }
    found
}

#[test]
fn the_spawner_thread_alone_is_filtered_and_programs_lack_its_exemptions() {
    // One filter and no_new_privs in the program.
    let res = run(&kreq(&[
        "/bin/grep",
        "-E",
        "^(Seccomp|NoNewPrivs)",
        "/proc/self/status",
    ]));
    assert_eq!(
        res.stdout, "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n",
        "{res:?}"
    );
    // In the host, the minimal profile's spawner thread is in filter mode; this thread is not.
    assert_eq!(thread_seccomp("sandbox-spawn-m"), ["Seccomp:\t2"]);
    let me = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    assert!(me.lines().any(|l| l == "Seccomp:\t0"), "{me}");
    // The spawner exempts setsid and clone3 only when they carry its secret: without it the
    // program meets the profile (setsid: stopped; clone3: ENOSYS, so a guess costs nothing
    // but needs 2^64 tries).
    let script = "import ctypes, os\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  r = libc.syscall(435, 0, 0, ctypes.c_uint64(0x1234567890abcdef))\n\
                  print(r, ctypes.get_errno() == 38, flush=True)\n\
                  libc.syscall(112, ctypes.c_uint64(0x1234567890abcdef))\n\
                  print('survived')\n";
    let res = run(&kreq(&[PYTHON, "-c", script]));
    assert_eq!(res.stdout, "-1 True\n", "{res:?}");
    assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
    assert_eq!(res.violation.expect("a violation").syscall, "setsid");
}

#[test]
fn attaching_the_filter_in_each_child_gives_the_same_results() {
    // The other way to start a child (StartFrom::CallingThread): the child installs the
    // filter itself and hands its listener over before exec.
    let opts = RunOptions {
        start: exec::StartFrom::CallingThread,
        ..RunOptions::default()
    };
    let res = exec::exec_with(&kreq(&["/bin/echo", "attached"]), &opts).unwrap();
    assert_eq!(
        (res.exit_code, res.stdout.as_str()),
        (Some(0), "attached\n")
    );
    assert_eq!(res.sandboxed.filter, Sandboxed::Exact);
    let r = kreq(&[PYTHON, "-c", "import socket; socket.socket()"]);
    let res = exec::exec_with(&r, &opts).unwrap();
    assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
    assert_eq!(res.violation.expect("a violation").syscall, "socket");
    let res = exec::exec_with(
        &kreq(&["/bin/grep", "^Seccomp_filters", "/proc/self/status"]),
        &opts,
    )
    .unwrap();
    assert_eq!(res.stdout, "Seccomp_filters:\t1\n");
}

#[test]
fn the_host_can_change_its_credentials_while_spawners_run() {
    // glibc's setuid family changes the credentials of every thread of the process, the
    // spawner threads (which run under a profile's filter) included, and aborts the process if
    // one thread fails.
    if !isolated(
        "the_host_can_change_its_credentials_while_spawners_run",
        &[],
    ) {
        return;
    }
    warm_up(&["minimal", "shell"]);
    // SAFETY: credential calls with valid arguments; the test process is root and stays root.
    unsafe {
        assert_eq!(libc::setgroups(0, std::ptr::null()), 0);
        assert_eq!(libc::setresgid(0, 0, 0), 0);
        assert_eq!(libc::setresuid(0, 0, 0), 0);
    }
    let res = run(&kreq(&["/bin/echo", "still"]));
    assert_eq!((res.exit_code, res.stdout.as_str()), (Some(0), "still\n"));
}

#[test]
fn concurrent_violations_are_each_reported_to_their_own_request() {
    // One listener serves every request of a profile: each refused call must reach the
    // request whose process made it, and no other.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= 48 {
                    break;
                }
                let script = match i % 3 {
                    0 => "import socket; print('a', flush=True); socket.socket()",
                    1 => "import os; print('b', flush=True); os.setsid()",
                    _ => "print('c')",
                };
                let res = run(&kreq(&[PYTHON, "-c", script]));
                let want = ["socket", "setsid", ""][i % 3];
                let got = res.violation.as_ref().map_or("", |v| v.syscall.as_str());
                assert_eq!(got, want, "request {i}: {res:?}");
                assert_eq!(res.stdout, format!("{}\n", ["a", "b", "c"][i % 3]));
            });
        }
    });
}

#[test]
fn violations_are_named_without_a_cgroup_too() {
    // Subreaper mode: the listener finds the request through the process's parents.
    let opts = RunOptions {
        containment: Containment::Subreaper,
        ..RunOptions::default()
    };
    let res = exec::exec_with(
        &kreq(&[PYTHON, "-c", "import socket; socket.socket()"]),
        &opts,
    )
    .unwrap();
    assert_eq!(res.violation.expect("a violation").syscall, "socket");
    let mut r = kreq(&[
        "/bin/sh",
        "-c",
        &format!("{PYTHON} -c 'import socket; socket.socket()'; echo after $?"),
    ]);
    r.profile = "shell".into();
    let res = exec::exec_with(&r, &opts).unwrap();
    assert_eq!(res.stdout, "after 159\n", "{res:?}");
    assert_eq!(res.violation.expect("a violation").syscall, "socket");
}

// ---- deny and report (the default) ----

/// A C program that makes `socket(AF_INET)` `n` times, printing errno, then "after".
fn socket_prog(
    dir: &std::path::Path,
    build: sandbox_tests::Build,
    name: &str,
) -> std::path::PathBuf {
    sandbox_tests::compile_c(
        dir,
        name,
        "#include <stdio.h>\n#include <errno.h>\n#include <stdlib.h>\n#include <sys/socket.h>\n\
         int main(int c, char **v) { int n = c > 1 ? atoi(v[1]) : 1;\n\
         for (int i = 0; i < n; i++) { int s = socket(AF_INET, SOCK_STREAM, 0);\n\
         if (i == 0) printf(\"socket %d errno %d\\n\", s, s < 0 ? errno : 0); }\n\
         puts(\"after\"); return 0; }\n",
        build,
    )
}

#[test]
fn a_refused_call_fails_with_eperm_and_the_program_goes_on() {
    for (build, name, confine) in [
        (sandbox_tests::Build::Dynamic, "report_dyn", false),
        (sandbox_tests::Build::Static, "report_static", true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let prog = socket_prog(dir.path(), build, name);
        let p = prog.to_str().unwrap();
        let mut r = req(&[p, "3"]);
        if confine {
            r.static_binary = sandbox_host::StaticBinaryAction::Confine;
        }
        let res = run(&r);
        assert_eq!(res.exit_code, Some(0), "{res:?}");
        assert_eq!(res.stdout, "socket -1 errno 1\nafter\n", "{res:?}");
        assert!(res.violation.is_none(), "{res:?}");
        assert_eq!(res.violations.len(), 1, "{res:?}");
        let v = &res.violations[0];
        assert_eq!((v.syscall.as_str(), v.count), ("socket", 3), "{v:?}");
        assert_eq!(v.program.as_deref(), Some(p), "{v:?}");
        assert_eq!(v.profile, "minimal");
        assert_eq!(
            v.change.as_deref(),
            Some("\"allow\": [\"socket\"], \"network\": \"none\""),
            "{v:?}"
        );
        // Control: with on_violation kill the same program dies at the call.
        r.on_violation = exec::OnViolation::Kill;
        let res = run(&r);
        assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
        assert_eq!(res.stdout, "", "{res:?}");
        assert_eq!(
            res.violation.expect("the call that killed").syscall,
            "socket"
        );
        // Control: under network the call succeeds and nothing is reported.
        let mut r = req(&[p]);
        r.profile = "network".into();
        if confine {
            r.static_binary = sandbox_host::StaticBinaryAction::Confine;
        }
        let res = run(&r);
        assert!(res.stdout.starts_with("socket 3 errno 0\n"), "{res:?}");
        assert!(res.violations.is_empty(), "{res:?}");
    }
}

#[test]
fn the_profile_errno_is_what_refused_calls_fail_with() {
    let dir = tempfile::tempdir().unwrap();
    let prog = socket_prog(dir.path(), sandbox_tests::Build::Dynamic, "report_errno");
    let file = dir.path().join("eacces.toml");
    std::fs::write(
        &file,
        "description = \"minimal, failing with EACCES\"\ndefault_action = \"errno:EACCES\"\n\
         allow = [\"@base\", \"@fd-io\", \"@fs-read\"]\n",
    )
    .unwrap();
    let mut r = req(&[prog.to_str().unwrap()]);
    r.profile_file = Some(file.display().to_string());
    let res = run(&r);
    assert_eq!(res.stdout, "socket -1 errno 13\nafter\n", "{res:?}");
    assert_eq!(res.violations[0].syscall, "socket", "{res:?}");
}

#[test]
fn a_flood_of_refused_calls_gives_counts_not_lines() {
    // 200,000 refused calls of one kind, and 100 distinct calls: bounded entries, exact counts.
    let dir = tempfile::tempdir().unwrap();
    let prog = socket_prog(dir.path(), sandbox_tests::Build::Dynamic, "report_flood");
    let res = run(&req(&[prog.to_str().unwrap(), "200000"]));
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert_eq!(res.violations.len(), 1);
    assert_eq!(res.violations[0].count, 200_000);
    let many = sandbox_tests::compile_c(
        dir.path(),
        "report_many",
        "#include <unistd.h>\n#include <sys/syscall.h>\n\
         int main(void) { for (long nr = 400; nr < 500; nr++) syscall(nr, 0, 0, 0);\n\
         return 0; }\n",
        sandbox_tests::Build::Dynamic,
    );
    let res = run(&req(&[many.to_str().unwrap()]));
    assert_eq!(res.exit_code, Some(0), "{res:?}");
    assert!(res.violations.len() <= 64, "{}", res.violations.len());
    let itemized: u64 = res.violations.iter().map(|v| v.count).sum();
    assert!(res.violations_omitted > 0);
    assert!(itemized + res.violations_omitted <= 100);
}

#[test]
fn a_host_holding_more_descriptors_than_the_request_limit_still_spawns() {
    // A profile file gets a filter attached in the child, whose listener needs a descriptor
    // number below the request's RLIMIT_NOFILE. Hold more than that many in this process.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        "description = \"minimal by file\"\nallow = [\"@base\", \"@fd-io\", \"@fs-read\"]\n",
    )
    .unwrap();
    let held: Vec<std::fs::File> = (0..400)
        .map(|_| std::fs::File::open("/dev/null").unwrap())
        .collect();
    let mut r = req(&["/bin/echo", "spawned"]);
    r.profile_file = Some(file.display().to_string());
    r.limits.nofile = Some(64);
    let res = run(&r);
    assert_eq!(res.stdout, "spawned\n", "{res:?}");
    drop(held);
}

#[test]
fn each_program_of_a_process_that_execs_is_named_for_its_own_refused_calls() {
    // One process, three executables in turn (the last exec made by a second thread): the
    // supervisor may keep a thread's executable between refused calls, never across an exec.
    let dir = tempfile::tempdir().unwrap();
    let src = "#include <pthread.h>\n#include <stdlib.h>\n#include <string.h>\n\
               #include <sys/socket.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n\
               static char **next;\n\
               static void *in_thread(void *a) { (void)a; execv(next[0], next); return 0; }\n\
               int main(int argc, char **argv) {\n\
                 for (int i = 0; i < atoi(argv[1]); i++) syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);\n\
                 if (argc < 4) return 0;\n\
                 next = argv + 3;\n\
                 if (!strcmp(argv[2], \"thread\")) {\n\
                   pthread_t t; pthread_create(&t, 0, in_thread, 0); pthread_join(t, 0);\n\
                 } else execv(next[0], next);\n\
                 return 9;\n\
               }\n";
    let a = sandbox_tests::compile_c(dir.path(), "exec_a", src, sandbox_tests::Build::Dynamic);
    let b = dir.path().join("exec_b");
    let c = dir.path().join("exec_c");
    std::fs::copy(&a, &b).unwrap();
    std::fs::copy(&a, &c).unwrap();
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    for _ in 0..3 {
        let mut r = req(&[a, "3", "main", b, "2", "thread", c, "1"]);
        r.profile = "shell".into();
        let res = run(&r);
        assert_eq!(res.exit_code, Some(0), "{res:?}");
        let seen: Vec<(&str, u64)> = res
            .violations
            .iter()
            .map(|v| (v.program.as_deref().unwrap_or("?"), v.count))
            .collect();
        assert_eq!(seen, [(a, 3), (b, 2), (c, 1)], "{res:?}");
    }
}
