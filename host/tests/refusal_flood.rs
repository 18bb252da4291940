//! A program that loops on a refused call costs the host a receive and a reply per call,
//! outside the job's limits: past the free calls the host paces its answers (the program
//! waits in the call), and the result says so. No timing is asserted: the warning and the
//! counts show the pacing engaged, and the control shows it does not below the bound.

use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::Command;

mod common;

use common::{command, output_with_input, BOTH, SANDBOX};

/// A C program making `argv[1]` refused calls (`socket`, which `minimal` refuses) and
/// printing how many failed.
const FLOOD_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]), failed = 0;
    for (long i = 0; i < n; i++)
        if (socket(AF_INET, SOCK_STREAM, 0) < 0)
            failed++;
    printf("%ld\n", failed);
    return 0;
}
"#;

fn flood_program(dir: &Path) -> String {
    let src = dir.join("flood.c");
    fs::write(&src, FLOOD_C).unwrap();
    let out = dir.join("flood");
    assert!(Command::new("gcc")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    out.display().to_string()
}

#[test]
fn a_flood_of_refused_calls_is_paced_and_said() {
    let dir = tempfile::Builder::new()
        .prefix("flood")
        .tempdir_in("/var/tmp")
        .unwrap();
    let prog = flood_program(dir.path());
    fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for who in BOTH {
        for (calls, paced) in [(5_000u64, false), (12_000, true)] {
            let req = serde_json::json!({
                "argv": [prog, calls.to_string()],
                "profile": "minimal",
            });
            let o = output_with_input(
                command(who, SANDBOX).args(["exec", "--json"]),
                req.to_string().as_bytes(),
            );
            let v: Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|_| panic!("{who:?}: {}", String::from_utf8_lossy(&o.stdout)));
            assert_eq!(v["exit_code"], 0, "{who:?} {calls}: {v}");
            assert_eq!(v["stdout"], format!("{calls}\n"), "{who:?} {calls}: {v}");
            let said = v["warnings"].as_array().into_iter().flatten().any(|w| {
                w.as_str()
                    .unwrap_or_default()
                    .contains("slowed, not stopped")
            });
            assert_eq!(said, paced, "{who:?} {calls}: {v}");
        }
    }
}

/// A C program changing the mode of a workspace file `argv[1]` times (each `chmod` the host
/// makes for it in the contained and isolated tiers) and printing how many worked.
const CHMOD_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]), done = 0;
    for (long i = 0; i < n; i++)
        if (chmod("f", i % 2 ? 0644 : 0600) == 0)
            done++;
    printf("%ld\n", done);
    return 0;
}
"#;

/// The calls the host makes for a job (here `chmod`, allowed, in the workspace) cost it CPU
/// outside the job's limits, as refused ones do: past the free calls they are paced and the
/// result says so, in the isolated and the contained tier; every call still works. Control:
/// below the bound nothing is said.
#[test]
fn a_flood_of_calls_the_host_makes_is_paced_and_said() {
    for who in BOTH {
        let ws = common::contained::owned_dir(who, "chmod-flood-");
        let src = ws.path().join("chmod.c");
        fs::write(&src, CHMOD_C).unwrap();
        let prog = ws.path().join("chmod-loop");
        assert!(Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(&src)
            .status()
            .unwrap()
            .success());
        fs::write(ws.path().join("f"), "x").unwrap();
        if who == common::As::Nobody {
            for p in [ws.path().join("f"), prog.clone()] {
                std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            }
        }
        for isolation in ["preferred", "off"] {
            for (calls, paced) in [(5_000u64, false), (12_000, true)] {
                let req = serde_json::json!({
                    "argv": [prog, calls.to_string()],
                    "profile": "shell",
                    "cwd": ws.path(),
                    "isolation": isolation,
                    "allow_root": true,
                });
                let o = output_with_input(
                    command(who, SANDBOX).args(["exec", "--json"]),
                    req.to_string().as_bytes(),
                );
                let v: Value = serde_json::from_slice(&o.stdout)
                    .unwrap_or_else(|_| panic!("{who:?}: {}", String::from_utf8_lossy(&o.stdout)));
                let at = format!("{who:?} {isolation} {calls}");
                assert_eq!(v["stdout"], format!("{calls}\n"), "{at}: {v}");
                let said = v["warnings"].as_array().into_iter().flatten().any(|w| {
                    w.as_str()
                        .unwrap_or_default()
                        .contains("of the program's calls for it")
                });
                assert_eq!(said, paced, "{at}: {v}");
            }
        }
    }
}
