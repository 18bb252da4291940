//! The per-request process limit and requests that do not outlive their host: as root by the
//! pids controller (cgroup v2 where it is delegated, else a v1 pids cgroup per request); for a
//! caller without one, by `RLIMIT_NPROC` in the isolation layer's user namespace; a request
//! does not outlive a host killed from outside. Each with a control.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{As, SANDBOX};

/// `sandbox exec --json` as uid 65534 (the kernel exempts root from RLIMIT_NPROC).
fn exec_as_nobody(request: &Value, dir: &std::path::Path) -> Value {
    let out = common::output_with_input(
        common::sandbox(As::Nobody)
            .args(["exec", "--json"])
            .current_dir(dir)
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent"),
        request.to_string().as_bytes(),
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    dir
}

#[test]
fn the_process_limit_holds_in_a_user_namespace_without_a_pids_controller() {
    let dir = world();
    let forks = "n=0; for i in $(seq 60); do sleep 2 & n=$((n+1)); done; wait; echo started $n";
    let request = |isolation: &str| {
        serde_json::json!({
            "argv": ["/bin/sh", "-c", forks],
            "profile": "shell",
            "isolation": isolation,
            "limits": {"processes": 20},
            "timeout_s": 30,
        })
    };
    let r = exec_as_nobody(&request("preferred"), dir.path());
    if r["isolation"]["namespaces"]
        .as_array()
        .is_none_or(|n| n.is_empty())
    {
        eprintln!("no user namespaces here: nothing to test");
        return;
    }
    assert!(
        r["stderr"].as_str().unwrap().contains("fork"),
        "the 21st process must not start: {r}"
    );
    assert_ne!(r["stdout"], "started 60\n", "{r}");
    // Control: without the namespace (and without a pids controller this caller can use) all
    // 60 start, or the limit is refused as unenforceable.
    let r = exec_as_nobody(&request("off"), dir.path());
    match r.get("error") {
        Some(e) => assert_eq!(e["field"], "limits.processes", "{r}"),
        None => assert!(
            r["stdout"] == "started 60\n" || r["stderr"].as_str().unwrap().contains("fork"),
            "{r}"
        ),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// One request through `sandbox exec --json`, `sandbox serve` or the library, as root.
fn exec_as_root(request: &Value, runner: &str) -> Value {
    if runner == "library" {
        let (out, _) = sandbox_host::exec::json::run_json(request.to_string().as_bytes());
        return serde_json::from_str(&out).unwrap();
    }
    let mut request = request.clone();
    let mut c = Command::new(SANDBOX);
    if runner == "serve" {
        request["id"] = serde_json::json!("r");
        c.arg("serve");
    } else {
        c.args(["exec", "--json"]);
    }
    c.current_dir("/tmp")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("LANG", "C.UTF-8");
    let out = common::output_with_input(&mut c, format!("{request}\n").as_bytes());
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

const FORKS: &str = "n=0; for i in $(seq 60); do sleep 2 & n=$((n+1)); done; wait; echo started $n";

#[test]
fn as_root_a_fork_bomb_stops_at_the_process_limit_and_the_result_names_it() {
    if !is_root() {
        eprintln!("not root: the unprivileged case is the test above");
        return;
    }
    for isolation in ["preferred", "off"] {
        for runner in ["exec", "serve", "library"] {
            let request = |limits: Value| {
                serde_json::json!({
                    "argv": ["/bin/sh", "-c", FORKS],
                    "profile": "shell",
                    "isolation": isolation,
                    "limits": limits,
                    "timeout_s": 30,
                })
            };
            let r = exec_as_root(&request(serde_json::json!({"processes": 20})), runner);
            if r["error"]["field"] == "limits.processes" {
                eprintln!("no pids controller for root here: {r}");
                return;
            }
            let ctx = format!("isolation {isolation}, runner {runner}: {r}");
            assert!(r["stderr"].as_str().unwrap().contains("fork"), "{ctx}");
            assert_ne!(r["stdout"], "started 60\n", "{ctx}");
            assert_eq!(r["limits_hit"], serde_json::json!(["processes"]), "{ctx}");
            assert!(
                r["warnings"].to_string().contains("limits.processes"),
                "{ctx}"
            );
            // Control: under the default limit all 60 start.
            let r = exec_as_root(&request(serde_json::json!({})), runner);
            let ctx = format!("control, isolation {isolation}, runner {runner}: {r}");
            assert_eq!(r["stdout"], "started 60\n", "{ctx}");
            assert_eq!(r["limits_hit"], serde_json::json!([]), "{ctx}");
        }
    }
}

#[test]
fn as_root_sandbox_run_gets_the_default_process_limit() {
    if !is_root() || !std::path::Path::new("/sys/fs/cgroup/pids").is_dir() {
        eprintln!("not root, or no v1 pids hierarchy: nothing to test");
        return;
    }
    // The pids cgroup the program is in, and its limit (the v1 hierarchy's root has none).
    let script = r#"p=$(awk -F: '$2=="pids"{print $3}' /proc/self/cgroup); cat "/sys/fs/cgroup/pids$p/pids.max""#;
    let out = Command::new(SANDBOX)
        .args([
            "run",
            "--allow-root",
            "--profile",
            "shell",
            "--",
            "/bin/sh",
            "-c",
            script,
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1024\n", "{out:?}");
    // Control: the same script outside the sandbox finds no limit of its own.
    let out = Command::new("/bin/sh")
        .args(["-c", script])
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&out.stdout), "1024\n", "{out:?}");
}

/// Whether a process whose whole command line is `cmdline` runs (not the host, whose
/// arguments contain it).
fn pgrep(cmdline: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("^{}$", cmdline.replace('.', "\\."))])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn a_request_does_not_outlive_a_host_killed_from_outside() {
    for isolation in ["preferred", "off"] {
        let marker = format!("sleep 97.{}", if isolation == "off" { 1 } else { 2 });
        let mut host = Command::new(SANDBOX)
            .args([
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--isolation",
                isolation,
            ])
            .args(["--", "/bin/sh", "-c", &marker])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut started = false;
        for _ in 0..100 {
            if pgrep(&marker) {
                started = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(started, "{isolation}: the command did not start");
        host.kill().unwrap();
        host.wait().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let left = pgrep(&marker);
        if isolation == "off" {
            // Control: without the PID namespace's init, the command outlives its host.
            assert!(left, "control: the command should still run");
            let _ = Command::new("pkill")
                .args(["-f", &format!("^{}$", marker.replace('.', "\\."))])
                .status();
        } else {
            assert!(!left, "the command outlived its killed host");
        }
    }
}

#[test]
fn as_root_request_cgroups_of_a_dead_host_are_removed_by_the_next_hosts() {
    let pids = std::path::Path::new("/sys/fs/cgroup/pids");
    if !is_root() || !pids.join("cgroup.procs").exists() {
        eprintln!("not root, or no v1 pids hierarchy: nothing to test");
        return;
    }
    // The host's own pids cgroup (the hierarchy's root here) is where request cgroups go.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let rel = own
        .lines()
        .find_map(|l| {
            l.split(':')
                .nth(2)
                .filter(|_| l.split(':').nth(1) == Some("pids"))
        })
        .unwrap()
        .trim_start_matches('/')
        .to_string();
    let base = pids.join(rel);
    // A host that is gone: a pid that has exited.
    let mut gone = Command::new("/bin/true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = base.join(format!("sandbox-exec-{dead}-v1-7"));
    // Control: one of a live process (this test) stays.
    let live = base.join(format!("sandbox-exec-{}-v1-7", std::process::id()));
    std::fs::create_dir(&stale).unwrap();
    std::fs::create_dir(&live).unwrap();
    // Not every host looks for stale cgroups (about one in 16, by pid): the next few do.
    let mut hosts = 0;
    while stale.exists() && hosts < 400 {
        let r = exec_as_root(
            &serde_json::json!({"argv": ["/bin/true"], "profile": "minimal"}),
            "exec",
        );
        assert_eq!(r["exit_code"], 0, "{r}");
        hosts += 1;
    }
    let kept = live.exists();
    let _ = std::fs::remove_dir(&live);
    let left = stale.exists();
    let _ = std::fs::remove_dir(&stale);
    assert!(
        !left,
        "the dead host's request cgroup is still there after {hosts} hosts"
    );
    assert!(kept, "control: a live host's request cgroup was removed");
}
