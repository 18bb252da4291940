//! The memory limit as agents meet it: the request cgroup's where the caller has one (as root
//! here: a v1 memory cgroup, or `memory.max` where cgroup v2 has the controller), so runtimes
//! that reserve address space start; RLIMIT_AS for a caller without one (uid 65534 here). A
//! limit that was hit is named in `limits_hit`. Through `exec --json`, `serve` and the library,
//! each with a control.

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

#[test]
fn node_starts_under_the_default_limits() {
    if !std::path::Path::new("/usr/bin/node").exists() {
        eprintln!("no /usr/bin/node here: nothing to test");
        return;
    }
    let request = json!({"argv": ["/usr/bin/node", "-e", "console.log(1)"], "profile": "shell"});
    if is_root() {
        for runner in ROOT_RUNNERS {
            let v = run(runner, &request);
            assert_eq!(
                (&v["exit_code"], &v["stdout"]),
                (&json!(0), &json!("1\n")),
                "{runner:?}: {v}"
            );
            assert_eq!(hits(&v), Vec::<String>::new(), "{runner:?}: {v}");
        }
    }
    // Control: the same default as an address-space limit (a caller without a memory cgroup)
    // stops V8 at start-up; the result says which limit to suspect.
    let v = run(Runner::ExecAsNobody, &request);
    if v["exit_code"] == 0 {
        eprintln!("uid 65534 has a memory cgroup here: no address-space control");
        return;
    }
    assert_ne!(v["stdout"], "1\n", "{v}");
    assert!(
        warnings(&v).contains("address-space limit")
            && warnings(&v).contains("limits.memory_bytes"),
        "{v}"
    );
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
    // Without a memory cgroup (uid 65534 here) the limit is RLIMIT_AS: the allocation fails
    // in the program, which reports it; the kernel leaves no counter, so `limits_hit` cannot
    // name it and a warning names the address-space limit instead.
    let v = run(Runner::ExecAsNobody, &allocation(SMALL));
    assert_ne!(v["stdout"], "134217728\n", "{v}");
    if hits(&v).is_empty() {
        assert!(v["stderr"].as_str().unwrap().contains("MemoryError"), "{v}");
        assert!(warnings(&v).contains("address-space limit"), "{v}");
    } else {
        assert_eq!(hits(&v), vec!["memory"], "{v}");
    }
    let v = run(Runner::ExecAsNobody, &allocation(LARGE));
    assert_eq!(v["stdout"], "134217728\n", "control: {v}");
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
