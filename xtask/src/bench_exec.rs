//! `cargo xtask bench`, exec section: requests per second of `sandbox_host::exec` running
//! `/bin/true` under the `minimal` profile, against plain `std::process::Command`, measured in
//! the same run in interleaved rounds so that machine drift hits both alike.

use anyhow::{bail, Context, Result};
use sandbox_host::exec::{self, Request};
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// Rounds the requests are split into (plain and exec alternate, round by round): many short
/// rounds, so that the machine's drifts (other guests on this VM's host) hit both kinds alike.
const ROUNDS: usize = 20;

/// Runs `n` requests of each kind and returns a Markdown section with the figures.
pub fn run(n: usize) -> Result<String> {
    let per_round = (n / ROUNDS).max(1);
    // Warm-up: extraction of the preload, profile compilation, cgroup detection, page cache.
    for _ in 0..20 {
        one_exec()?;
        one_plain()?;
    }
    let mut plain = Vec::with_capacity(ROUNDS);
    let mut sandboxed = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // Alternate which goes first, so neither always runs on a warmer machine.
        if round % 2 == 0 {
            plain.push(time(per_round, one_plain)?);
            sandboxed.push(time(per_round, one_exec)?);
        } else {
            sandboxed.push(time(per_round, one_exec)?);
            plain.push(time(per_round, one_plain)?);
        }
    }
    let rps = |d: Duration| per_round as f64 / d.as_secs_f64();
    let plain_rps: Vec<f64> = plain.iter().map(|d| rps(*d)).collect();
    let exec_rps: Vec<f64> = sandboxed.iter().map(|d| rps(*d)).collect();
    let total =
        |v: &[Duration]| (per_round * v.len()) as f64 / v.iter().sum::<Duration>().as_secs_f64();
    let p = total(&plain);
    let e = total(&sandboxed);
    let ratio = e / p;
    let paired: Vec<f64> = exec_rps
        .iter()
        .zip(&plain_rps)
        .map(|(e, p)| e / p)
        .collect();
    let paired_median = median(&paired);

    let mut md = String::new();
    writeln!(md, "## exec: requests per second\n")?;
    writeln!(
        md,
        "{} requests of each kind (`/bin/true`), {ROUNDS} interleaved rounds of {per_round}; requests per second over all rounds.\n",
        per_round * ROUNDS
    )?;
    writeln!(md, "| runner | requests/s | per request | rate per round |")?;
    writeln!(md, "|---|---|---|---|")?;
    writeln!(
        md,
        "| plain `Command::new(\"/bin/true\").status()` (same environment) | {p:.0} | {:.0} µs | {} |",
        1e6 / p,
        list(&plain_rps)
    )?;
    writeln!(
        md,
        "| `exec` (minimal profile, full runtime) | {e:.0} | {:.0} µs | {} |",
        1e6 / e,
        list(&exec_rps)
    )?;
    writeln!(
        md,
        "\nRatio exec / plain: **{ratio:.2}** (target ≥ 0.80: {}); median of the {ROUNDS} paired round ratios: {paired_median:.2}.",
        if ratio >= 0.8 { "met" } else { "missed" }
    )?;
    Ok(md)
}

/// One plain `/bin/true` spawn, in the environment the exec runtime gives its children (the
/// baseline of the exec and serve benchmarks).
pub(crate) fn one_plain() -> Result<()> {
    // The same environment the exec runtime gives its child: inherited variables (cargo sets
    // LD_LIBRARY_PATH, which sends the loader through extra directories) would slow only the
    // baseline and flatter the ratio.
    let st = Command::new("/bin/true")
        .env_clear()
        .envs(safe_env().iter().map(|(k, v)| (k, v)))
        .status()
        .context("spawning /bin/true")?;
    if !st.success() {
        bail!("/bin/true failed: {st}");
    }
    Ok(())
}

/// The scrubbed environment an exec request's child gets.
pub(crate) fn safe_env() -> &'static [(String, String)] {
    static ENV: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| exec::env::scrubbed(&Default::default()))
}

fn one_exec() -> Result<()> {
    let r = exec::exec(&Request::new(["/bin/true"])).context("exec /bin/true")?;
    if r.exit_code != Some(0) || r.sandboxed.filter != sandbox_host::Sandboxed::Exact {
        bail!("exec /bin/true: {r:?}");
    }
    Ok(())
}

/// Wall time of `n` calls of `f`.
pub(crate) fn time(n: usize, f: impl Fn() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..n {
        f()?;
    }
    Ok(t.elapsed())
}

/// The median (upper middle) of `v`.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}
