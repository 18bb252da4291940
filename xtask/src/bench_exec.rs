//! `cargo xtask bench`, exec section: requests per second of `sandbox_host::exec` running
//! `/bin/true` under the `minimal` profile, against plain `std::process::Command`, measured in
//! the same run in interleaved rounds so that machine drift hits both alike. Two engine rows:
//! the default request (Landlock and the namespace layer on, as every front end runs it), and
//! the engine alone (`landlock` and `isolation` off), which is what the library's own cost
//! target is about: the layers have targets of their own (their sections).

use anyhow::{bail, Context, Result};
use sandbox_host::exec::{self, Request};
use sandbox_host::LayerMode;
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// Rounds the requests are split into (the kinds take turns, round by round): many short
/// rounds, so that the machine's drifts (other guests on this VM's host) hit all alike.
const ROUNDS: usize = 20;

/// A row: its label and one request of its kind.
type Kind = (&'static str, fn() -> Result<()>);

/// What the engine row must reach against plain spawns.
const TARGET: f64 = 0.95;

/// Runs `n` requests of each kind and returns a Markdown section with the figures.
pub fn run(n: usize) -> Result<String> {
    let per_round = (n / ROUNDS).max(1);
    // The floors: the kernel work alone, in C (`bench_floor`'s `warm` mode), a round's requests
    // by one launcher process: plain spawns, and the engine's per-request work once warm.
    let dir = crate::bench_floor::helper_dir("exec");
    let floor = crate::bench_floor::compile(&dir)?;
    let filter = crate::bench_floor::engine_filter_allowing(
        &dir,
        &[
            "vfork",
            "clone3",
            "execve",
            "wait4",
            "setsid",
            "prlimit64",
            "pread64",
        ],
    )?;
    let cgroups = crate::bench_floor::WarmCgroups::new()?;
    let floor_run = |mode: &str, n: usize| {
        crate::bench_floor::warm(&floor, n, mode, &cgroups, &filter, safe_env())
    };
    let floors = ["plain", "engine"];
    let mut floor_times = vec![Vec::with_capacity(ROUNDS); floors.len()];
    floor_run("plain", 20)?;
    floor_run("engine", 20)?;
    let kinds: [Kind; 3] = [
        (
            "plain `Command::new(\"/bin/true\").status()` (same environment)",
            one_plain,
        ),
        (
            "`exec`, `minimal`, the engine alone (`landlock` and `isolation` off)",
            || one_exec(LayerMode::Off),
        ),
        (
            "`exec`, `minimal`, default layers (Landlock, namespaces: `network` none)",
            || one_exec(LayerMode::Preferred),
        ),
    ];
    // Warm-up: profile compilation, cgroup detection, the spawner thread, page cache.
    for _ in 0..20 {
        for (_, f) in &kinds {
            f()?;
        }
    }
    let mut rates = vec![Vec::with_capacity(ROUNDS); kinds.len()];
    let mut times = vec![Vec::with_capacity(ROUNDS); kinds.len()];
    let all = kinds.len() + floors.len();
    for round in 0..ROUNDS {
        // Rotate which goes first, so no kind always runs on a warmer machine.
        for i in 0..all {
            let k = (round + i) % all;
            if k < kinds.len() {
                let d = time(per_round, kinds[k].1)?;
                rates[k].push(per_round as f64 / d.as_secs_f64());
                times[k].push(d);
            } else {
                let took = floor_run(floors[k - kinds.len()], per_round)?;
                floor_times[k - kinds.len()].push(took);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let total =
        |v: &[Duration]| (per_round * v.len()) as f64 / v.iter().sum::<Duration>().as_secs_f64();
    let overall: Vec<f64> = times.iter().map(|t| total(t)).collect();
    let paired = |k: usize| {
        median(
            &rates[k]
                .iter()
                .zip(&rates[0])
                .map(|(e, p)| e / p)
                .collect::<Vec<_>>(),
        )
    };

    let mut md = String::new();
    writeln!(
        md,
        "## exec: requests per second
"
    )?;
    writeln!(
        md,
        "{} requests of each kind (`/bin/true`), {ROUNDS} interleaved rounds of {per_round}; requests per second over all rounds.\n",
        per_round * ROUNDS
    )?;
    writeln!(
        md,
        "| runner | requests/s | per request | vs plain | rate per round |"
    )?;
    writeln!(md, "|---|---|---|---|---|")?;
    for (k, (name, _)) in kinds.iter().enumerate() {
        writeln!(
            md,
            "| {name} | {:.0} | {:.0} µs | {:.2}x | {} |",
            overall[k],
            1e6 / overall[k],
            overall[k] / overall[0],
            list(&rates[k])
        )?;
    }
    let floor_rate: Vec<f64> = floor_times.iter().map(|t| total(t)).collect();
    for (name, rate) in [
        "C floor: a launcher's `vfork`, exec, wait (what `Command` does), a round's requests by one process",
        "C floor: the engine's kernel work per warm request (pooled v2, v1 `pids` and `memory` cgroups, a session, the four limits, the `minimal` filter held by the launcher, the three counters read)",
    ]
    .iter()
    .zip(&floor_rate)
    {
        writeln!(
            md,
            "| {name} | {rate:.0} | {:.0} µs | {:.2}x | |",
            1e6 / rate,
            rate / overall[0],
        )?;
    }
    let ratio = overall[1] / overall[0];
    writeln!(
        md,
        "\nThe engine alone against plain: **{ratio:.2}** (target ≥ {TARGET}: {}); median of the {ROUNDS} paired round ratios: {:.2}. With the default layers: {:.2} (paired {:.2}).",
        if ratio >= TARGET { "met" } else { "missed" },
        paired(1),
        overall[2] / overall[0],
        paired(2),
    )?;
    writeln!(
        md,
        "\nThe floors bound what any engine with the same containment can reach: the engine's kernel work alone runs at **{:.2}x** the plain floor's rate (each floor launcher is one process per round, whose own start and exit the round's requests share).",
        floor_rate[1] / floor_rate[0],
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
    ENV.get_or_init(|| exec::env::scrubbed(exec::env::Base::Fixed, &Default::default()))
}

fn one_exec(layers: LayerMode) -> Result<()> {
    let mut r = Request::new(["/bin/true"]);
    r.landlock = layers;
    r.isolation = layers;
    let r = exec::exec(&r).context("exec /bin/true")?;
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
