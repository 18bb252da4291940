//! `cargo xtask bench --process-api`: the CPU time one command costs through the process API
//! (gRPC `Execute` of `/bin/true` against a warm `sandbox serve --process-api`) against
//! `sandbox exec --json` of the same request (a new `sandbox` process per command), both under
//! the server's default policy (`shell`, the workspace a temporary directory).
//!
//! CPU time, not wall time: the figure is what a pod pays per command. For the server it is
//! the delta of its own and its reaped children's CPU time (`/proc/PID/stat` utime, stime,
//! cutime, cstime) over a batch of calls made by one Python client (generated from `proto/`
//! with grpcio-tools), whose own CPU is the agent's and not counted; for `exec --json` it is
//! `getrusage(RUSAGE_CHILDREN)` around each run (the `sandbox` process and everything it
//! reaped). Interleaved rounds, median of the per-command figures of each round.
//!
//! The binary is a release build with the `process-api` feature (`target/process-api-build`),
//! or the one `BENCH_SANDBOX` names.

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Rounds; each runs `per` commands of each kind.
const ROUNDS: usize = 15;

/// Runs the comparison and returns a Markdown section.
pub fn run(per: usize) -> Result<String> {
    let root = crate::workspace::root();
    let bin = binary(&root)?;
    let (python, stubs) = client(&root)?;
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws)?;
    let grpc = free_addr()?;
    let rest = free_addr()?;
    let mut server = Command::new(&bin)
        .args(["serve", "--process-api", "--api-workspace"])
        .arg(&ws)
        .args(["--grpc-listen", &grpc, "--rest-listen", &rest])
        .env_clear()
        .envs(crate::bench_exec::safe_env().iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .spawn()
        .context("starting sandbox serve --process-api")?;
    let result = measure(&bin, &python, &stubs, &ws, &grpc, &mut server, per);
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    result
}

fn measure(
    bin: &Path,
    python: &Path,
    stubs: &Path,
    ws: &Path,
    grpc: &str,
    server: &mut Child,
    per: usize,
) -> Result<String> {
    let client = root_client();
    let batch = |n: usize| -> Result<()> {
        let out = Command::new(python)
            .arg(&client)
            .arg(stubs)
            .arg(grpc)
            .arg("bench")
            .arg(format!(r#"{{"command": ["/bin/true"], "n": {n}}}"#))
            .stdin(Stdio::null())
            .output()
            .context("running the Python client")?;
        if !out.status.success() {
            bail!(
                "the client failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    // The server answers once its listener is up.
    let until = Instant::now() + Duration::from_secs(20);
    while batch(1).is_err() {
        if server.try_wait()?.is_some() || Instant::now() > until {
            bail!("sandbox serve --process-api did not start");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let request = format!(
        r#"{{"argv": ["/bin/true"], "profile": "shell", "workspace": "{}"}}"#,
        ws.display()
    );
    let exec_once = || -> Result<f64> {
        let before = children_cpu();
        let mut child = Command::new(bin)
            .args(["exec", "--json"])
            .env_clear()
            .envs(crate::bench_exec::safe_env().iter().map(|(k, v)| (k, v)))
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        child.stdin.take().unwrap().write_all(request.as_bytes())?;
        let st = child.wait()?;
        if !st.success() {
            bail!("sandbox exec --json failed: {st}");
        }
        Ok(children_cpu() - before)
    };
    // Warm-up: page cache, the server's spawner threads and admission cache.
    batch(20)?;
    for _ in 0..5 {
        exec_once()?;
    }
    let (mut api, mut exec) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for k in 0..2 {
            if (round + k) % 2 == 0 {
                let before = process_cpu(server.id())?;
                batch(per)?;
                api.push((process_cpu(server.id())? - before) / per as f64);
            } else {
                let mut sum = 0.0;
                for _ in 0..per {
                    sum += exec_once()?;
                }
                exec.push(sum / per as f64);
            }
        }
    }
    let (a, e) = (
        crate::bench_exec::median(&api),
        crate::bench_exec::median(&exec),
    );
    let mut md = String::new();
    writeln!(md, "## Process API: gRPC `Execute` against `exec --json`\n")?;
    writeln!(
        md,
        "`cargo xtask bench --process-api`: CPU time per command of `/bin/true` under `shell` \
         with a workspace, {ROUNDS} interleaved rounds of {per} commands each, median of the \
         rounds (module `xtask/src/bench_process_api.rs` says how each side is counted).\n"
    )?;
    writeln!(md, "| how | CPU ms per command |")?;
    writeln!(md, "|---|---|")?;
    writeln!(
        md,
        "| `sandbox exec --json` (a new process per command) | {:.2} |",
        e * 1e3
    )?;
    writeln!(
        md,
        "| gRPC `Execute` to a warm `sandbox serve --process-api` | {:.2} |",
        a * 1e3
    )?;
    writeln!(
        md,
        "\nRatio: {:.2}x the CPU of `exec --json`. Both sides are the same binary (a release \
         build with the feature, dynamically linked); the server's figure includes everything \
         it reaped (the sandbox's init, the command), not the client's own CPU, which is the \
         agent's and is about what an `exec --json` caller spends writing a request.\n",
        a / e
    )?;
    Ok(md)
}

/// CPU seconds of this process's reaped children so far (`/proc/self/stat` cutime, cstime).
fn children_cpu() -> f64 {
    stat_ticks(std::process::id(), 13..15).unwrap_or(0.0)
}

/// The sum of `/proc/PID/stat` fields `range` (counted from 0 after the command name's `)`,
/// where 0 is the state: 11 utime, 12 stime, 13 cutime, 14 cstime), in seconds.
fn stat_ticks(pid: u32, range: std::ops::Range<usize>) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("/proc/PID/stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[range]
        .iter()
        .map(|f| f.parse::<f64>().unwrap_or(0.0))
        .sum();
    Ok(ticks / clock_ticks())
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when that cannot be run).
fn clock_ticks() -> f64 {
    static HZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU seconds of a process and its reaped children (utime, stime, cutime, cstime).
fn process_cpu(pid: u32) -> Result<f64> {
    stat_ticks(pid, 11..15)
}

fn free_addr() -> Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

fn root_client() -> PathBuf {
    crate::workspace::root().join("host/tests/process_api/client.py")
}

/// The release binary with the feature, built if needed (or `BENCH_SANDBOX`).
fn binary(root: &Path) -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("BENCH_SANDBOX") {
        return Ok(PathBuf::from(bin));
    }
    let target = root.join("target/process-api-build");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "sandbox-host",
            "--bin",
            "sandbox",
        ])
        .args(["--features", "process-api", "--target-dir"])
        .arg(&target)
        .current_dir(root)
        .status()
        .context("starting cargo build")?;
    if !status.success() {
        bail!("cargo build --features process-api failed: {status}");
    }
    Ok(target.join("release/sandbox"))
}

/// The Python client's environment (the tests' venv: grpcio, grpcio-tools, the stubs).
fn client(root: &Path) -> Result<(PathBuf, PathBuf)> {
    let venv = root.join("target/process-api-venv");
    let python = venv.join("bin/python");
    let stubs = venv.join("stubs");
    let run = |c: &mut Command| -> Result<()> {
        let st = c.status()?;
        if !st.success() {
            bail!("{c:?} failed: {st}");
        }
        Ok(())
    };
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    run(Command::new(&python).args(["-m", "pip", "install", "--quiet", "grpcio", "grpcio-tools"]))?;
    std::fs::create_dir_all(&stubs)?;
    let proto = root.join("proto");
    run(Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&proto)
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg(proto.join("process/v1/process.proto")))?;
    Ok((python, stubs))
}
