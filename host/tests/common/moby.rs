//! Docker's default seccomp profile as dockerd hands it to runc, for the tests that run
//! `sandbox` inside runc containers shaped like `docker run` (`containers.rs`,
//! `containers_userns.rs`).

use std::path::Path;

/// The moby profile's JSON.
pub fn moby_profile() -> serde_json::Value {
    let shared = Path::new("/work/shared/data/moby-seccomp/default.json");
    let vendored =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy/tests/data/moby/default.json");
    let path = if shared.exists() {
        shared.to_path_buf()
    } else {
        vendored
    };
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The moby profile as dockerd gives it to runc for an x86_64 container with `caps`: rules
/// kept or dropped by their `includes`/`excludes` (capabilities, architectures, minimum
/// kernel: every kernel this runs on is newer than any the profile names).
pub fn docker_seccomp(caps: &[&str]) -> serde_json::Value {
    let moby = moby_profile();
    let has = |list: &serde_json::Value, wanted: &dyn Fn(&str) -> bool| {
        list.as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str().is_some_and(wanted)))
    };
    let all = |list: &serde_json::Value, wanted: &dyn Fn(&str) -> bool| {
        list.as_array()
            .is_none_or(|a| a.iter().all(|v| v.as_str().is_some_and(wanted)))
    };
    let amd64 = |a: &str| a == "amd64";
    let cap = |c: &str| caps.contains(&c);
    let mut rules = Vec::new();
    for rule in moby["syscalls"].as_array().unwrap() {
        let inc = &rule["includes"];
        let exc = &rule["excludes"];
        if !all(&inc["caps"], &cap) || (inc["arches"].is_array() && !has(&inc["arches"], &amd64)) {
            continue;
        }
        if has(&exc["caps"], &cap) || has(&exc["arches"], &amd64) {
            continue;
        }
        let mut r = serde_json::json!({"names": rule["names"], "action": rule["action"]});
        for k in ["errnoRet", "args"] {
            if !rule[k].is_null() {
                r[k] = rule[k].clone();
            }
        }
        rules.push(r);
    }
    serde_json::json!({
        "defaultAction": moby["defaultAction"],
        "defaultErrnoRet": moby["defaultErrnoRet"],
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": rules,
    })
}
