//! The memory limit as agents meet it: one limit for the whole job, never an address-space
//! limit. The request cgroup's where the caller has one (as root here: a v1 memory cgroup, or
//! `memory.max` where cgroup v2 has the controller); the host's watchdog for a caller without
//! one (uid 65534 here). Real toolchains (node, npm, go, rustc, python) run under the default;
//! a job whose processes together pass the limit is stopped and `memory` is named; a program
//! that fails for another reason gets no word about memory. Through `exec --json`, `serve` and
//! the library, as root and as uid 65534, each with a control.

use sandbox_host::exec::json::run_json;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

mod common;

use common::As;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[derive(Clone, Copy, Debug)]
enum Runner {
    Exec,
    ExecAsNobody,
    Serve,
    Library,
}

/// The command agents start, in their bare environment (see `common::command`) from /tmp,
/// with a home elsewhere (a home as the working directory is refused as a workspace).
fn bare(c: &mut Command) -> &mut Command {
    c.env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .current_dir("/tmp")
}

/// One request through `runner`; its result.
fn run(runner: Runner, request: &Value) -> Value {
    let mut request = request.clone();
    if matches!(runner, Runner::Serve) {
        request["id"] = json!("r");
    }
    let line = request.to_string();
    let text = match runner {
        Runner::Library => run_json(line.as_bytes()).0,
        Runner::Exec | Runner::ExecAsNobody | Runner::Serve => {
            let mut c = match runner {
                Runner::ExecAsNobody => common::sandbox(As::Nobody),
                _ => common::sandbox(As::Root),
            };
            match runner {
                Runner::Serve => c.arg("serve"),
                _ => c.args(["exec", "--json"]),
            };
            let mut child = bare(&mut c)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(line.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
            drop(stdin);
            let mut out = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut out)
                .unwrap();
            child.wait().unwrap();
            out
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{runner:?}: {e}: {text:?}"))
}

fn hits(v: &Value) -> Vec<String> {
    serde_json::from_value(v["limits_hit"].clone()).unwrap_or_else(|_| panic!("{v}"))
}

fn warnings(v: &Value) -> String {
    v["warnings"].to_string()
}

const ROOT_RUNNERS: [Runner; 3] = [Runner::Exec, Runner::Serve, Runner::Library];

/// `argv` under the old default, an address-space limit of 512 MiB (`ulimit -v`), through
/// `bash -c`: the control that shows what the job-wide limit fixes.
fn under_old_default(argv: &[&str]) -> Vec<String> {
    let mut v = vec![
        "/bin/bash".to_string(),
        "-c".to_string(),
        "ulimit -v 524288 && exec \"$@\"".to_string(),
        "old-default".to_string(),
    ];
    v.extend(argv.iter().map(|a| a.to_string()));
    v
}

#[test]
fn node_starts_under_the_default_limits() {
    if !std::path::Path::new("/usr/bin/node").exists() {
        eprintln!("no /usr/bin/node here: nothing to test");
        return;
    }
    let argv = ["/usr/bin/node", "-e", "console.log(1)"];
    let request = json!({"argv": argv, "profile": "shell"});
    let mut runners = vec![Runner::ExecAsNobody];
    if is_root() {
        runners.extend(ROOT_RUNNERS);
    }
    for runner in runners {
        let v = run(runner, &request);
        assert_eq!(
            (&v["exit_code"], &v["stdout"]),
            (&json!(0), &json!("1\n")),
            "{runner:?}: {v}"
        );
        assert_eq!(
            (hits(&v), warnings(&v)),
            (vec![], "[]".to_string()),
            "{runner:?}: {v}"
        );
        // Control: the old default, an address-space limit of the same size, stops V8 at
        // start-up.
        let v = run(
            runner,
            &json!({"argv": under_old_default(&argv), "profile": "shell"}),
        );
        assert_ne!(v["stdout"], "1\n", "{runner:?}: {v}");
        assert!(
            v["stderr"].as_str().unwrap().contains("CodeRange"),
            "{runner:?}: {v}"
        );
    }
}

/// Allocates and writes 128 MiB under a memory limit of `limit` bytes.
fn allocation(limit: u64) -> Value {
    json!({
        "argv": ["/usr/bin/python3", "-c", "b = b'x' * (128 << 20); print(len(b))"],
        "profile": "shell",
        "limits": {"memory_bytes": limit},
    })
}

const SMALL: u64 = 64 << 20;
const LARGE: u64 = 512 << 20;

#[test]
fn an_allocation_beyond_the_memory_limit_is_stopped_and_named() {
    if is_root() {
        for runner in ROOT_RUNNERS {
            let v = run(runner, &allocation(SMALL));
            assert_ne!(v["stdout"], "134217728\n", "{runner:?}: {v}");
            assert_eq!(v["signal"], libc::SIGKILL, "{runner:?}: {v}");
            assert_eq!(hits(&v), vec!["memory"], "{runner:?}: {v}");
            assert!(
                warnings(&v).contains("limit hit: memory")
                    && warnings(&v).contains("limits.memory_bytes"),
                "{runner:?}: {v}"
            );
            // Control: the same allocation under a larger limit.
            let v = run(runner, &allocation(LARGE));
            assert_eq!(v["stdout"], "134217728\n", "{runner:?}: {v}");
            assert_eq!(
                (hits(&v), warnings(&v)),
                (vec![], "[]".to_string()),
                "{runner:?}: {v}"
            );
        }
    }
    // Without a memory cgroup (uid 65534 here) the host's watchdog ends the job and names the
    // limit; with a memory cgroup for uid 65534 the cgroup does.
    let v = run(Runner::ExecAsNobody, &allocation(SMALL));
    assert_ne!(v["stdout"], "134217728\n", "{v}");
    assert_eq!(v["signal"], libc::SIGKILL, "{v}");
    assert_eq!(hits(&v), vec!["memory"], "{v}");
    assert!(
        warnings(&v).contains("limit hit: memory") && warnings(&v).contains("limits.memory_bytes"),
        "{v}"
    );
    let v = run(Runner::ExecAsNobody, &allocation(LARGE));
    assert_eq!(v["stdout"], "134217728\n", "control: {v}");
    assert_eq!((hits(&v), warnings(&v)), (vec![], "[]".to_string()), "{v}");
}

#[test]
fn hostile_memory_limits_are_refused_or_mean_no_limit() {
    for bad in [
        json!(0),
        json!(1 << 20),
        json!(-1),
        json!("512M"),
        json!(1.5),
    ] {
        let v = run(
            Runner::Library,
            &json!({"argv": ["/bin/true"], "limits": {"memory_bytes": bad}}),
        );
        assert_eq!(v["error"]["field"], "limits.memory_bytes", "{bad}: {v}");
    }
    // Beyond any machine's memory: no limit, and the program runs.
    let v = run(
        Runner::Library,
        &json!({"argv": ["/bin/true"], "limits": {"memory_bytes": u64::MAX}}),
    );
    assert_eq!(v["exit_code"], 0, "{v}");
}

/// The runners that run as each user: `exec --json` as root (when the tests run as root) and
/// as uid 65534.
fn both_users() -> Vec<Runner> {
    if is_root() {
        vec![Runner::Exec, Runner::ExecAsNobody]
    } else {
        vec![Runner::ExecAsNobody]
    }
}

/// A world-writable workspace holding a Go and a Rust hello world (uid 65534 builds there too).
fn toolchain_workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new().prefix("mem-ws").tempdir().unwrap();
    for (name, text) in [
        (
            "hello.go",
            "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello\") }\n",
        ),
        ("hello.rs", "fn main() { println!(\"hello\"); }\n"),
    ] {
        std::fs::write(d.path().join(name), text).unwrap();
    }
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// The rustc uid 65534 can run too: Debian's (CI installs it), else none for it; root falls
/// back to the toolchain this test was built with.
fn rustc_for(runner: Runner) -> Option<String> {
    if std::path::Path::new("/usr/bin/rustc").exists() {
        return Some("/usr/bin/rustc".into());
    }
    if matches!(runner, Runner::ExecAsNobody) {
        return None;
    }
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    Some(format!("{}/bin/rustc", sysroot.trim()))
}

#[test]
fn real_toolchains_run_under_the_default_limits_as_root_and_as_nobody() {
    let ws = toolchain_workspace();
    let dir = ws.path().to_str().unwrap().to_string();
    for runner in both_users() {
        let who = format!("{runner:?}").to_lowercase();
        // Each user its own Go cache: root's would not be writable by uid 65534.
        let env = json!({"HOME": dir, "GOCACHE": format!("{dir}/gocache-{who}")});
        let out_go = format!("hello-go-{who}");
        let out_rs = format!("hello-rs-{who}");
        let rustc = rustc_for(runner);
        // (program, argv, whether the old address-space default stops it: the control)
        let mut jobs: Vec<(&str, Vec<String>, bool)> = vec![
            (
                "/usr/bin/node",
                vec!["/usr/bin/node".into(), "-e".into(), "console.log(1)".into()],
                true,
            ),
            (
                "/usr/bin/npm",
                vec!["/usr/bin/npm".into(), "--version".into()],
                true,
            ),
            (
                "/usr/bin/go",
                ["/usr/bin/go", "build", "-o", &out_go, "hello.go"]
                    .map(String::from)
                    .to_vec(),
                true,
            ),
            (
                "/usr/bin/python3",
                [
                    "/usr/bin/python3",
                    "-c",
                    "b = b'x' * (200 << 20); print(len(b))",
                ]
                .map(String::from)
                .to_vec(),
                false,
            ),
        ];
        match &rustc {
            Some(r) => {
                jobs.push((r, vec![r.clone(), "--version".into()], false));
                jobs.push((
                    r,
                    vec![r.clone(), "-o".into(), out_rs.clone(), "hello.rs".into()],
                    false,
                ));
            }
            None => eprintln!("{runner:?}: no rustc this user can run here: rustc not tried"),
        }
        for (program, argv, old_default_breaks) in jobs {
            if !std::path::Path::new(program).exists() {
                eprintln!("no {program} here: not tried");
                continue;
            }
            let request = |argv: Vec<String>| {
                json!({
                    "argv": argv, "profile": "shell", "cwd": dir, "workspace": dir,
                    "env": env, "timeout_s": 300,
                })
            };
            let v = run(runner, &request(argv.clone()));
            assert_eq!(v["exit_code"], 0, "{runner:?} {argv:?}: {v}");
            assert_eq!(
                (hits(&v), warnings(&v)),
                (vec![], "[]".to_string()),
                "{runner:?} {argv:?}: {v}"
            );
            if old_default_breaks {
                // Control: the same program under the old default's address-space limit.
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let v = run(runner, &request(under_old_default(&argv)));
                assert_ne!(v["exit_code"], 0, "control {runner:?} {argv:?}: {v}");
            }
        }
        assert!(ws.path().join(&out_go).exists() || !std::path::Path::new("/usr/bin/go").exists());
        assert!(ws.path().join(&out_rs).exists() || rustc.is_none());
    }
}

/// Three processes that each take `each` MiB (written, so resident) and hold it two seconds;
/// the parent prints how many of them failed.
fn three_processes(each: u64, limit: u64, per_process_ulimit: bool) -> Value {
    let script = format!(
        "import os, time\n\
         kids = []\n\
         for _ in range(3):\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       b = b'x' * ({each} << 20)\n\
         \x20       time.sleep(2)\n\
         \x20       os._exit(0)\n\
         \x20   kids.append(pid)\n\
         print(sum(os.waitpid(p, 0)[1] != 0 for p in kids), 'failed')\n"
    );
    let argv = ["/usr/bin/python3", "-c", &script];
    let argv: Vec<String> = if per_process_ulimit {
        // A per-process limit of 512 MiB (RLIMIT_DATA, what a per-process fallback would be).
        let mut v: Vec<String> = [
            "/bin/bash",
            "-c",
            "ulimit -d 524288 && exec \"$@\"",
            "per-process",
        ]
        .map(String::from)
        .to_vec();
        v.extend(argv.map(String::from));
        v
    } else {
        argv.map(String::from).to_vec()
    };
    json!({"argv": argv, "profile": "shell", "limits": {"memory_bytes": limit}, "timeout_s": 60})
}

#[test]
fn three_processes_of_300_mib_are_stopped_by_the_512_mib_job_limit_as_root_and_as_nobody() {
    for runner in both_users() {
        // In the request's own PID namespace, and without one (isolation off: the watchdog
        // follows the process tree, as uid 65534 here).
        for isolation in ["preferred", "off"] {
            let mut request = three_processes(300, LARGE, false);
            request["isolation"] = json!(isolation);
            let v = run(runner, &request);
            assert_ne!(v["stdout"], "0 failed\n", "{runner:?} {isolation}: {v}");
            assert_eq!(hits(&v), vec!["memory"], "{runner:?} {isolation}: {v}");
            assert!(
                warnings(&v).contains("limit hit: memory"),
                "{runner:?} {isolation}: {v}"
            );
        }
        // Control: under a 2 GiB job limit the same job finishes, and a per-process limit of
        // 512 MiB would not have stopped it (each process stays below it).
        for per_process in [false, true] {
            let v = run(runner, &three_processes(300, 4 * LARGE, per_process));
            assert_eq!(
                (&v["exit_code"], &v["stdout"]),
                (&json!(0), &json!("0 failed\n")),
                "control {runner:?} per-process {per_process}: {v}"
            );
            assert_eq!(hits(&v), Vec::<String>::new(), "{runner:?}: {v}");
        }
    }
}

#[test]
fn failures_that_are_not_memory_get_no_memory_warning() {
    for runner in both_users() {
        let quiet =
            |v: &Value| !warnings(v).contains("memory") && !hits(v).contains(&"memory".to_string());
        let v = run(runner, &json!({"argv": ["/bin/false"]}));
        assert_eq!(v["exit_code"], 1, "{runner:?}: {v}");
        assert!(quiet(&v), "{runner:?}: {v}");
        // A plain non-zero exit after using memory below the limit.
        let v = run(
            runner,
            &json!({"argv": ["/usr/bin/python3", "-c", "b = b'x' * (100 << 20); raise SystemExit(3)"]}),
        );
        assert_eq!(v["exit_code"], 3, "{runner:?}: {v}");
        assert!(quiet(&v), "{runner:?}: {v}");
        let v = run(
            runner,
            &json!({"argv": ["/bin/sleep", "30"], "timeout_s": 1}),
        );
        assert_eq!(hits(&v), vec!["time"], "{runner:?}: {v}");
        assert!(quiet(&v), "{runner:?}: {v}");
        // Control: a real memory hit gets the warning.
        let v = run(runner, &allocation(SMALL));
        assert!(!quiet(&v), "control {runner:?}: {v}");
    }
}

/// `sandbox run --allow-root FLAGS -- ARGV` as `who` in `cwd`: (exit status, stdout, stderr).
fn run_in(who: As, cwd: &std::path::Path, flags: &[&str], argv: &[&str]) -> (i32, String, String) {
    let o = common::sandbox(who)
        .args(["run", "--allow-root"])
        .args(flags)
        .arg("--")
        .args(argv)
        .current_dir(cwd)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `sandbox run --memory SIZE` and `--processes N` on a one-shot run, as docker and podman
/// take them: an allocation past the limit ends the job (137) and the line names the limit
/// and the flag; control: the same allocation under a larger limit finishes. Sizes with units
/// parse; sizes that do not, or are too small, are refused naming the flag, and nothing runs.
#[test]
fn run_takes_memory_and_process_limits_with_units() {
    for who in common::BOTH {
        let ws = common::contained::owned_dir(who, "limits-");
        let run = |flags: &[&str], argv: &[&str]| run_in(who, ws.path(), flags, argv);
        let alloc = ["python3", "-c", "b = b'x' * (200 << 20); print('done')"];
        let (code, out, err) = run(&["--memory", "96M"], &alloc);
        assert_eq!(code, 137, "{who:?}: {out}{err}");
        assert!(
            err.contains("limit hit: memory") && err.contains("--memory"),
            "{who:?}: {err}"
        );
        let (code, out, err) = run(&["--memory", "1GiB"], &alloc);
        assert_eq!((code, out.as_str()), (0, "done\n"), "{who:?}: {err}");
        // Processes: eight at once; the ninth fork is refused and named with its flag.
        let forks = ["bash", "-c", "for i in $(seq 16); do sleep 2 & done; wait"];
        let (_, _, err) = run(&["--profile", "shell", "--processes", "8"], &forks);
        assert!(
            err.contains("limit hit: processes") && err.contains("--processes"),
            "{who:?}: {err}"
        );
        let (code, _, err) = run(&["--profile", "shell", "--processes", "64"], &forks);
        assert_eq!(code, 0, "{who:?}: {err}");
        // Refused before anything runs.
        for (flags, code, said) in [
            (["--memory", "16M"], 125, "--memory: must be at least 32M"),
            (["--memory", "1.5G"], 2, "a whole number of bytes"),
            (["--memory", "12Q"], 2, "the unit must be K, M, G or T"),
            (["--memory", "0"], 2, "must be more than zero"),
            (
                ["--processes", "0"],
                125,
                "--processes: must be between 1 and 65536",
            ),
        ] {
            let (c, out, err) = run(&flags, &["echo", "ran"]);
            assert_eq!(c, code, "{who:?} {flags:?}: {err}");
            assert!(err.contains(said), "{who:?} {flags:?}: {err}");
            assert_eq!(out, "", "{who:?} {flags:?}");
        }
    }
}

/// The private `/tmp` and `/dev/shm` hold at most the job's memory between them (three
/// quarters and a quarter), so a job cannot keep more of the machine's memory in files than
/// in its processes; filling one is a named memory limit. Control: without a memory limit the
/// same 100 MiB fit. A request's default limit (512 MiB) sizes them too.
#[test]
fn the_private_tmp_and_shm_are_sized_within_the_jobs_memory() {
    for who in common::BOTH {
        let ws = common::contained::owned_dir(who, "tmpfs-");
        let run = |flags: &[&str], script: &str| {
            let flags = [&["--profile", "shell"], flags].concat();
            run_in(who, ws.path(), &flags, &["bash", "-c", script])
        };
        let fill = "dd if=/dev/zero of=/tmp/big bs=1M count=100 status=none";
        let (code, _, err) = run(&[], fill);
        assert_eq!(code, 0, "{who:?} control: {err}");
        let (code, _, err) = run(&["--memory", "64M"], fill);
        assert_eq!(code, 1, "{who:?}: {err}");
        assert!(
            err.contains("limit hit: memory: the job's /tmp or /dev/shm was full")
                && err.contains("--memory"),
            "{who:?}: {err}"
        );
        let shm = "dd if=/dev/zero of=/dev/shm/big bs=1M count=32 status=none";
        let (code, _, err) = run(&["--memory", "64M"], shm);
        assert_eq!(code, 1, "{who:?}: {err}");
        let sizes = "df --output=size -B1M /tmp /dev/shm | tail -2 | tr -d ' ' | tr '\\n' ' '";
        let (_, out, err) = run(&["--memory", "512M"], sizes);
        assert_eq!(out, "384 128 ", "{who:?}: {err}");
    }
}
