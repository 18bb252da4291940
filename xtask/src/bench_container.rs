//! `cargo xtask bench --in-container`: what `sandbox` gives where agents are deployed. For each
//! container setting (Docker's default, a pod with `Unconfined` seccomp and runc's masked
//! `/proc`, a gVisor-like filter, Docker's default with Landlock capped at ABI 2 and 4) it
//! starts one runc container, as uid 1000 with Docker's capabilities in its bounding set, and
//! inside it:
//!
//! - runs every cell of the agent matrix (`xtask/src/agent_matrix.rs`: every command under
//!   every built-in profile, through `bash -c`) with `sandbox exec --json`, each in a fresh
//!   copy of the fixture, and counts the cells whose outcome is the one the matrix expects on
//!   the host (works where the profile's purpose covers the command, refused otherwise);
//! - times `sandbox run --profile minimal -- /bin/true` against `/bin/true` itself (medians of
//!   interleaved runs, from a Python timer inside the container).
//!
//! The container is shaped as `host/tests/containers.rs` shapes its containers (the same moby
//! profile, filtered the way dockerd filters it for Docker's default capabilities). Needs root
//! and runc; printed, not written (the figures go to docs/containers.md by hand).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use xtask::agent_matrix::{self as m, Expected};

/// A container setting.
struct Setting {
    name: &'static str,
    seccomp: Option<Value>,
    /// Extra environment of the container's process.
    env: &'static [&'static str],
}

/// The port of the HTTP server the driver starts inside the container (the matrix's `{PORT}`).
const PORT: u16 = 18765;

/// What the server answers (as the matrix's own server does).
const SERVED: &str = "banana\\napple\\ncherry\\napple\\n";

fn moby() -> Result<Value> {
    let root = crate::workspace::root();
    let shared = Path::new("/work/shared/data/moby-seccomp/default.json");
    let path = if shared.exists() {
        shared.to_path_buf()
    } else {
        root.join("policy/tests/data/moby/default.json")
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// The moby profile as dockerd gives it to runc for an x86_64 container with Docker's default
/// capabilities (the same selection as `host/tests/containers.rs`).
fn docker_seccomp() -> Result<Value> {
    let moby = moby()?;
    let caps = sandbox_policy::oci::DOCKER_DEFAULT_CAPS;
    let any = |list: &Value, want: &dyn Fn(&str) -> bool| {
        list.as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str().is_some_and(want)))
    };
    let all = |list: &Value, want: &dyn Fn(&str) -> bool| {
        list.as_array()
            .is_none_or(|a| a.iter().all(|v| v.as_str().is_some_and(want)))
    };
    let amd64 = |a: &str| a == "amd64";
    let cap = |c: &str| caps.contains(&c);
    let mut rules = Vec::new();
    for rule in moby["syscalls"].as_array().context("moby syscalls")? {
        let (inc, exc) = (&rule["includes"], &rule["excludes"]);
        if !all(&inc["caps"], &cap) || (inc["arches"].is_array() && !any(&inc["arches"], &amd64)) {
            continue;
        }
        if any(&exc["caps"], &cap) || any(&exc["arches"], &amd64) {
            continue;
        }
        let mut r = json!({"names": rule["names"], "action": rule["action"]});
        for k in ["errnoRet", "args"] {
            if !rule[k].is_null() {
                r[k] = rule[k].clone();
            }
        }
        rules.push(r);
    }
    Ok(json!({
        "defaultAction": moby["defaultAction"],
        "defaultErrnoRet": moby["defaultErrnoRet"],
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": rules,
    }))
}

/// Docker's filter with gVisor's answers: `landlock_*` ENOSYS, `seccomp` with the LOG,
/// SPEC_ALLOW or NEW_LISTENER flag EINVAL (as `host/tests/containers.rs` builds it).
fn gvisor_seccomp() -> Result<Value> {
    let mut f = docker_seccomp()?;
    let taken = [
        "seccomp",
        "landlock_create_ruleset",
        "landlock_add_rule",
        "landlock_restrict_self",
    ];
    let rules = f["syscalls"].as_array_mut().context("syscalls")?;
    for rule in rules.iter_mut() {
        if let Some(names) = rule["names"].as_array_mut() {
            names.retain(|n| !n.as_str().is_some_and(|n| taken.contains(&n)));
        }
    }
    rules.retain(|r| r["names"].as_array().is_some_and(|n| !n.is_empty()));
    rules.push(json!({"names": &taken[1..], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}));
    for flag in [2u64, 4, 8] {
        rules.push(json!({
            "names": ["seccomp"], "action": "SCMP_ACT_ERRNO", "errnoRet": 22,
            "args": [{"index": 1, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]
        }));
    }
    rules.push(json!({
        "names": ["seccomp"], "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 1, "value": 14, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]
    }));
    Ok(f)
}

/// The driver's timer: medians (ms) of `n` interleaved runs of `/bin/true` and of the sandbox.
const TIMER_PY: &str = r#"
import os, subprocess, sys, time
n = int(sys.argv[1])
env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/srv/h", "LANG": "C.UTF-8"}
runs = {"true": ["/bin/true"], "sandbox": ["/t/sandbox", "run", "--profile", "minimal", "--", "/bin/true"]}
times = {k: [] for k in runs}
for _ in range(n):
    for k, argv in runs.items():
        t = time.perf_counter()
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[k].append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            sys.exit(f"{argv} failed: {r.returncode}")
for k, v in times.items():
    v.sort()
    print(k, round(v[len(v) // 2], 2))
"#;

/// The driver: the server, every cell in a fresh copy of the fixture, then the timer.
fn driver(n: usize) -> String {
    format!(
        "python3 -c 'import http.server as h\n\
class H(h.BaseHTTPRequestHandler):\n    def do_GET(s):\n        b = b\"{SERVED}\"\n        s.send_response(200); s.send_header(\"Content-Length\", str(len(b))); s.end_headers(); s.wfile.write(b)\n    def log_message(s, *a): pass\n\
h.HTTPServer((\"127.0.0.1\", {PORT}), H).serve_forever()' &\n\
sleep 0.5\n\
for f in /srv/req/*.json; do\n  i=$(basename \"$f\" .json)\n  mkdir -p /srv/c/$i && cp -a /srv/fx/ws /srv/fx/home /srv/c/$i/\n  /t/sandbox exec --json < \"$f\" > /srv/out/$i.json 2>/dev/null\n  rm -rf /srv/c/$i\ndone\n\
python3 /srv/timer.py {n} > /srv/out/time.txt\n\
kill %1\n"
    )
}

/// One setting's figures.
struct Figures {
    as_expected: usize,
    works: usize,
    expected_works: usize,
    total: usize,
    tier: String,
    true_ms: f64,
    sandbox_ms: f64,
}

/// Runs the driver in a container of `setting`; `cells` are (command, profile) pairs.
fn measure(
    sandbox: &Path,
    setting: &Setting,
    cells: &[(&'static m::Cmd, &'static str)],
    n: usize,
) -> Result<Figures> {
    let dir = tempfile::Builder::new()
        .prefix("sandbox-bench-container-")
        .tempdir()?;
    let d = dir.path();
    let root = d.join("rootfs");
    for sub in ["usr", "etc", "proc", "dev", "sys", "tmp", "t", "srv"] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    for l in ["bin", "sbin", "lib", "lib64"] {
        if Path::new("/").join(l).exists() {
            std::os::unix::fs::symlink(format!("usr/{l}"), root.join(l))?;
        }
    }
    let srv = d.join("srv");
    for sub in ["req", "out", "c", "fx", "h"] {
        std::fs::create_dir_all(srv.join(sub))?;
    }
    let fixture = m::master()?;
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture.join("ws"))
        .arg(fixture.join("home"))
        .arg(srv.join("fx"))
        .status()?;
    if !st.success() {
        bail!("copying the fixture failed");
    }
    for (i, (cmd, profile)) in cells.iter().enumerate() {
        let script = cmd.script.replace("{PORT}", &PORT.to_string());
        let req = json!({
            "argv": ["/bin/bash", "-c", script],
            "cwd": format!("/srv/c/{i:04}/ws"),
            "profile": profile,
            "timeout_s": 300.0,
            "env": {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": format!("/srv/c/{i:04}/home"),
                "LANG": "C.UTF-8",
            },
        });
        std::fs::write(srv.join(format!("req/{i:04}.json")), req.to_string())?;
    }
    std::fs::write(srv.join("timer.py"), TIMER_PY)?;
    std::fs::write(srv.join("driver.sh"), driver(n))?;
    let st = Command::new("chown")
        .args(["-R", "1000:1000"])
        .arg(&srv)
        .status()?;
    if !st.success() {
        bail!("chown failed");
    }
    let o = Command::new("runc")
        .args(["spec", "--bundle"])
        .arg(d)
        .output()?;
    if !o.status.success() {
        bail!("runc spec: {o:?}");
    }
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(d.join("config.json"))?)?;
    let caps = sandbox_policy::oci::DOCKER_DEFAULT_CAPS;
    c["process"]["terminal"] = false.into();
    c["process"]["args"] = json!(["/bin/bash", "/srv/driver.sh"]);
    c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    c["process"]["cwd"] = "/srv".into();
    let mut env = vec![
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "HOME=/srv/h",
        "LANG=C.UTF-8",
    ];
    env.extend_from_slice(setting.env);
    c["process"]["env"] = json!(env);
    c["process"]["noNewPrivileges"] = false.into();
    c["process"]["capabilities"] = json!({"bounding": caps});
    c["root"] = json!({"path": root, "readonly": true});
    let mut mounts: Vec<Value> = c["mounts"]
        .as_array()
        .context("mounts")?
        .iter()
        .filter(|m| m["destination"] != "/sys/fs/cgroup")
        .cloned()
        .collect();
    let bin = sandbox.parent().context("binary directory")?;
    for (src, dst, mode) in [
        (PathBuf::from("/usr"), "/usr", "ro"),
        (PathBuf::from("/etc"), "/etc", "ro"),
        (bin.to_path_buf(), "/t", "ro"),
        (srv.clone(), "/srv", "rw"),
    ] {
        mounts.push(json!({
            "destination": dst, "type": "bind", "source": src, "options": ["rbind", mode]
        }));
    }
    // A /tmp of the container's own, world-writable and sticky as a container's is.
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))?;
    mounts.push(json!({
        "destination": "/tmp", "type": "bind", "source": tmp, "options": ["rbind", "rw"]
    }));
    c["mounts"] = mounts.into();
    match &setting.seccomp {
        Some(f) => c["linux"]["seccomp"] = f.clone(),
        None => {
            if let Some(l) = c["linux"].as_object_mut() {
                l.remove("seccomp");
            }
        }
    }
    std::fs::write(d.join("config.json"), c.to_string())?;
    let id = format!("sandbox-bench-{}", std::process::id());
    let o = Command::new("runc")
        .args(["run", "--bundle"])
        .arg(d)
        .arg(&id)
        .stdin(Stdio::null())
        .output()?;
    let _ = Command::new("runc").args(["delete", "-f", &id]).output();
    if !o.status.success() {
        bail!(
            "{}: the container failed: {}",
            setting.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut f = Figures {
        as_expected: 0,
        works: 0,
        expected_works: 0,
        total: cells.len(),
        tier: String::new(),
        true_ms: 0.0,
        sandbox_ms: 0.0,
    };
    for (i, (cmd, profile)) in cells.iter().enumerate() {
        let out = std::fs::read_to_string(srv.join(format!("out/{i:04}.json")))?;
        let r: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        let works = r["exit_code"] == 0
            && r["stdout"].as_str().is_some_and(|s| s.contains(cmd.expect))
            && r["violation"].is_null();
        let expected = m::expected(cmd, profile)?;
        f.works += usize::from(works);
        f.expected_works += usize::from(expected == Expected::Works);
        f.as_expected += usize::from(works == (expected == Expected::Works));
        if works != (expected == Expected::Works) {
            // Each cell that differs from the host, named, so a share below 100% says which.
            let err = r["stderr"].as_str().unwrap_or("");
            eprintln!(
                "bench: {}: {} under {profile}: {} (exit {}, violation {}): {}",
                setting.name,
                cmd.id,
                if works {
                    "works, refused on the host"
                } else {
                    "refused, works on the host"
                },
                r["exit_code"],
                r["violation"],
                err.lines()
                    .last()
                    .unwrap_or("")
                    .chars()
                    .take(200)
                    .collect::<String>()
            );
        }
        if f.tier.is_empty() {
            f.tier = r["tier"].as_str().unwrap_or("").to_string();
        }
    }
    let time = std::fs::read_to_string(srv.join("out/time.txt"))?;
    for line in time.lines() {
        match line.split_once(' ') {
            Some(("true", v)) => f.true_ms = v.parse()?,
            Some(("sandbox", v)) => f.sandbox_ms = v.parse()?,
            _ => {}
        }
    }
    Ok(f)
}

/// The section: one row per setting, `n` timed runs each.
pub fn run(n: usize) -> Result<String> {
    if Command::new("runc").arg("--version").output().is_err() {
        bail!("runc is not installed");
    }
    // SANDBOX_BENCH_BIN names another build to measure (docs/containers.md says which the
    // figures are of); by default the shipped one.
    let sandbox = match std::env::var_os("SANDBOX_BENCH_BIN") {
        Some(p) => std::fs::canonicalize(p).context("SANDBOX_BENCH_BIN")?,
        None => crate::bench_serve::sandbox_binary()?,
    };
    let docker = docker_seccomp()?;
    let settings = [
        Setting {
            name: "Docker default",
            seccomp: Some(docker.clone()),
            env: &[],
        },
        Setting {
            name: "`Unconfined` seccomp, masked /proc",
            seccomp: None,
            env: &[],
        },
        Setting {
            name: "gVisor-like",
            seccomp: Some(gvisor_seccomp()?),
            env: &[],
        },
        Setting {
            name: "Docker default, Landlock ABI 2",
            seccomp: Some(docker.clone()),
            env: &["SANDBOX_LANDLOCK_MAX_ABI=2"],
        },
        Setting {
            name: "Docker default, Landlock ABI 4",
            seccomp: Some(docker),
            env: &["SANDBOX_LANDLOCK_MAX_ABI=4"],
        },
    ];
    let node = Path::new("/usr/bin/node").exists();
    let cells: Vec<(&'static m::Cmd, &'static str)> = m::PROFILES
        .iter()
        .flat_map(|p| m::COMMANDS.iter().map(move |c| (c, *p)))
        .filter(|(c, _)| node || c.id != "node")
        .collect();
    let mut md = String::from(
        "| container setting | tier | cells as on the host | cells that work (of those expected to) | `/bin/true` | `run --profile minimal -- /bin/true` | cost |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for s in &settings {
        eprintln!("bench: {} ({} cells)", s.name, cells.len());
        let f = measure(&sandbox, s, &cells, n)?;
        md.push_str(&format!(
            "| {} | {} | {}/{} ({:.0}%) | {}/{} | {:.2} ms | {:.2} ms | +{:.2} ms |\n",
            s.name,
            f.tier,
            f.as_expected,
            f.total,
            100.0 * f.as_expected as f64 / f.total as f64,
            f.works,
            f.expected_works,
            f.true_ms,
            f.sandbox_ms,
            f.sandbox_ms - f.true_ms
        ));
    }
    Ok(md)
}
