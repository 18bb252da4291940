//! What the namespaces add to the security review's findings on processes: a per-request
//! process limit where the machine's cgroups have no pids controller, and a request that does
//! not outlive a host killed from outside. Each with a control (`isolation: off`).

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

const SANDBOX: &str = env!("CARGO_BIN_EXE_sandbox");

/// `sandbox exec --json` as uid 65534 (the kernel exempts root from RLIMIT_NPROC).
fn exec_as_nobody(request: &Value, dir: &std::path::Path) -> Value {
    let mut child = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args([SANDBOX, "exec", "--json"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
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
    // Control: without the namespace (and without a pids controller) all 60 start, or the
    // limit is refused as unenforceable where the machine has a pids controller it can use.
    let r = exec_as_nobody(&request("off"), dir.path());
    match r.get("error") {
        Some(e) => assert_eq!(e["field"], "limits.processes", "{r}"),
        None => assert!(
            r["stdout"] == "started 60\n" || r["stderr"].as_str().unwrap().contains("fork"),
            "{r}"
        ),
    }
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
