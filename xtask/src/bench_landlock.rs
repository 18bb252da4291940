//! `cargo xtask bench`, Landlock section: what the Landlock layer costs, against the same run
//! with `--landlock off` measured in the same interleaved rounds.
//!
//! - one-shot: CPU time (user + system, the `sandbox` process and its child, from the
//!   children's rusage) of `sandbox run --profile shell -- /bin/true`;
//! - warm: requests per second of the library's exec path running `/bin/true` under `shell`,
//!   where the ruleset is built once and reused while the paths it was built from are
//!   unchanged; each request timed on its own, the two kinds taking turns request by request,
//!   a round's rate being that of its median request.

use anyhow::{bail, Context, Result};
use sandbox_host::exec::{self, Request};
use sandbox_host::landlock::Mode;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

/// CPU seconds used by reaped children so far.
pub(crate) fn children_cpu() -> f64 {
    // SAFETY: a zeroed rusage is a valid output buffer for getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// CPU milliseconds of one run of `sandbox run ... /bin/true`.
fn one_shot(sandbox: &std::path::Path, landlock: &str, dir: &std::path::Path) -> Result<f64> {
    let before = children_cpu();
    let status = Command::new(sandbox)
        .args([
            "run",
            "--allow-root",
            "--profile",
            "shell",
            "--landlock",
            landlock,
        ])
        .args(["--", "/bin/true"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .status()
        .context("sandbox run")?;
    if !status.success() {
        bail!("sandbox run --landlock {landlock}: {status}");
    }
    Ok((children_cpu() - before) * 1e3)
}

fn one_exec(mode: Mode, dir: &str) -> Result<()> {
    let mut r = Request::new(["/bin/true"]);
    r.profile = "shell".into();
    r.cwd = Some(dir.into());
    r.landlock = mode;
    let res = exec::exec(&r).context("exec /bin/true")?;
    if res.exit_code != Some(0) || res.landlock.is_some() != (mode != Mode::Off) {
        bail!("exec /bin/true: {res:?}");
    }
    Ok(())
}

/// The one-minute load average (`/proc/loadavg`), to print beside the figures.
pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The section; `rounds` interleaved rounds of `per` runs of each kind.
pub fn run(rounds: usize, per: usize) -> Result<String> {
    let load_before = load();
    let sandbox = crate::bench_serve::sandbox_binary()?;
    let ws = tempfile::tempdir()?;
    let dir = ws.path().to_str().context("workspace path")?.to_string();
    // Warm-up: extraction, page cache, the ruleset cache of this process.
    for _ in 0..20 {
        one_shot(&sandbox, "preferred", ws.path())?;
        one_shot(&sandbox, "off", ws.path())?;
        one_exec(Mode::Preferred, &dir)?;
        one_exec(Mode::Off, &dir)?;
    }
    let (mut cpu_on, mut cpu_off) = (Vec::new(), Vec::new());
    let (mut rps_on, mut rps_off) = (Vec::new(), Vec::new());
    let med = crate::bench_exec::median;
    for round in 0..rounds {
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for i in 0..per {
            // Alternate which goes first, so neither always runs on a warmer machine.
            if (round + i) % 2 == 0 {
                on.push(one_shot(&sandbox, "preferred", ws.path())?);
                off.push(one_shot(&sandbox, "off", ws.path())?);
            } else {
                off.push(one_shot(&sandbox, "off", ws.path())?);
                on.push(one_shot(&sandbox, "preferred", ws.path())?);
            }
        }
        // The round's median run: one run slowed by a burst of load elsewhere does not
        // move it, as it would a mean.
        cpu_on.push(med(&on));
        cpu_off.push(med(&off));
        // Request by request, taking turns like the one-shot runs, and the round's rate from
        // its median request: a burst of load from elsewhere then neither hits one block of
        // requests of one kind nor moves the figure with a single slow request.
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let warm = |mode: Mode| -> Result<f64> {
            let t = Instant::now();
            one_exec(mode, &dir)?;
            Ok(t.elapsed().as_secs_f64())
        };
        for i in 0..per {
            if (round + i) % 2 == 0 {
                on.push(warm(Mode::Preferred)?);
                off.push(warm(Mode::Off)?);
            } else {
                off.push(warm(Mode::Off)?);
                on.push(warm(Mode::Preferred)?);
            }
        }
        rps_on.push(1.0 / med(&on));
        rps_off.push(1.0 / med(&off));
    }
    let ratio = |a: &[f64], b: &[f64]| {
        let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        med(&r)
    };
    let mut md = String::new();
    writeln!(md, "## Landlock layer: cost against `--landlock off`\n")?;
    writeln!(
        md,
        "`/bin/true` under `shell`, {rounds} interleaved rounds of {per} runs of each kind; each round's median run (warm: requests/s of its median request); the table gives the medians of the rounds, ratio = median of per-round ratios. Targets: one-shot CPU <= 1.05x, warm throughput >= 0.97x.\n"
    )?;
    writeln!(md, "| measure | Landlock on | `--landlock off` | ratio |")?;
    writeln!(md, "|---|---|---|---|")?;
    writeln!(
        md,
        "| one-shot `sandbox run`: CPU ms per run | {:.2} | {:.2} | {:.2}x |",
        med(&cpu_on),
        med(&cpu_off),
        ratio(&cpu_on, &cpu_off)
    )?;
    writeln!(
        md,
        "| warm library exec: requests/s | {:.0} | {:.0} | {:.2}x |\n",
        med(&rps_on),
        med(&rps_off),
        ratio(&rps_on, &rps_off)
    )?;
    let per_round = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| format!("{:.2}", x / y))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        md,
        "Per-round ratios: one-shot {}; warm {}. Load average {load_before} before, {} after.\n",
        per_round(&cpu_on, &cpu_off),
        per_round(&rps_on, &rps_off),
        load()
    )?;
    Ok(md)
}
