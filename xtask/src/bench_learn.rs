//! `cargo xtask bench`, learn section: what recording every call costs the learned command.
//! `/usr/bin/python3 -c 'import json'` plain, under `sandbox run --profile unrestricted` (the
//! same spawn path without a filter: what `sandbox` itself costs), and under `sandbox learn`,
//! in interleaved rounds; CPU time (user + system of the run and everything it started, from
//! the children's rusage) and wall time, medians of the rounds. Target: learn <= 3x plain CPU.

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bench_landlock::children_cpu;

const PROGRAM: &[&str] = &["/usr/bin/python3", "-c", "import json"];

/// The three ways of running the program.
#[derive(Clone, Copy)]
enum Way {
    Plain,
    Run,
    Learn,
}

/// (CPU ms, wall ms) of one run.
fn once(way: Way, sandbox: &Path, dir: &Path) -> Result<(f64, f64)> {
    let mut c = match way {
        Way::Plain => Command::new(PROGRAM[0]),
        Way::Run => {
            let mut c = Command::new(sandbox);
            c.args(["run", "--allow-root", "--profile", "unrestricted", "--"]);
            c.arg(PROGRAM[0]);
            c
        }
        Way::Learn => {
            let mut c = Command::new(sandbox);
            c.args(["learn", "--out"])
                .arg(dir.join("learned.toml"))
                .arg("--")
                .arg(PROGRAM[0]);
            c
        }
    };
    c.args(&PROGRAM[1..])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let before = children_cpu();
    let t = Instant::now();
    let status = c.status().context("starting the benchmark command")?;
    let wall = t.elapsed().as_secs_f64() * 1e3;
    if !status.success() {
        bail!("{c:?}: {status}");
    }
    Ok(((children_cpu() - before) * 1e3, wall))
}

/// The section; `rounds` interleaved rounds of `per` runs of each way.
pub fn run(rounds: usize, per: usize) -> Result<String> {
    let sandbox = crate::bench_serve::sandbox_binary()?;
    let dir = tempfile::tempdir()?;
    let ways = [Way::Plain, Way::Run, Way::Learn];
    for _ in 0..5 {
        for w in ways {
            once(w, &sandbox, dir.path())?;
        }
    }
    let mut cpu = [Vec::new(), Vec::new(), Vec::new()];
    let mut wall = [Vec::new(), Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut sum = [(0.0, 0.0); 3];
        for i in 0..per {
            // Rotate the order, so no way always runs first on a warmer machine.
            for k in 0..3 {
                let w = (k + round + i) % 3;
                let (c, t) = once(ways[w], &sandbox, dir.path())?;
                sum[w].0 += c;
                sum[w].1 += t;
            }
        }
        for w in 0..3 {
            cpu[w].push(sum[w].0 / per as f64);
            wall[w].push(sum[w].1 / per as f64);
        }
        ratios.push(sum[2].0 / sum[0].0);
    }
    let med = crate::bench_exec::median;
    let mut md = String::new();
    writeln!(md, "## `sandbox learn`: cost of recording every call\n")?;
    writeln!(
        md,
        "`python3 -c 'import json'`, {rounds} interleaved rounds of {per} runs of each way; medians of the rounds. CPU is user + system time of the run and everything it started (children's rusage), so it includes `sandbox` and its recorder thread. Target: learn <= 3x plain CPU.\n"
    )?;
    writeln!(md, "| way | CPU ms per run | wall ms per run | CPU ratio |")?;
    writeln!(md, "|---|---|---|---|")?;
    let names = [
        "plain",
        "`sandbox run --profile unrestricted`",
        "`sandbox learn`",
    ];
    for w in 0..3 {
        let ratio: Vec<f64> = cpu[w].iter().zip(&cpu[0]).map(|(a, b)| a / b).collect();
        writeln!(
            md,
            "| {} | {:.1} | {:.1} | {:.2}x |",
            names[w],
            med(&cpu[w]),
            med(&wall[w]),
            med(&ratio)
        )?;
    }
    writeln!(
        md,
        "\nLearn / plain CPU per round: {}.\n",
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(md)
}
