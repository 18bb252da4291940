//! `cargo xtask bench`, serve section: requests per second of one long-lived `sandbox serve`
//! process (stdin mode, requests pipelined) running `/bin/true` under `minimal`, against plain
//! `std::process::Command`, in interleaved rounds as in the exec section; and the server's
//! peak memory after 1,000 and after 10,000 requests.

use crate::bench_exec::{median, one_plain, safe_env, time};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Rounds the requests are split into (the runners take turns, round by round).
const ROUNDS: usize = 20;

/// Runs `n` requests of each kind and returns a Markdown section with the figures.
pub fn run(n: usize) -> Result<String> {
    let bin = sandbox_binary()?;
    let dir = crate::bench_floor::helper_dir("serve");
    let floor = crate::bench_floor::compile(&dir);
    let md = floor.and_then(|f| section(&bin, &f, n));
    let _ = std::fs::remove_dir_all(&dir);
    md
}

/// One run of the C floor launcher (`bench_floor::FLOOR_C`): `/bin/true` in fresh user, PID,
/// mount, IPC, UTS and network namespaces, as a serve request gets them, by a launcher that
/// does nothing else.
fn one_floor(floor: &std::path::Path) -> Result<()> {
    let st = Command::new(floor)
        .args(["net", "/bin/true"])
        .env_clear()
        .envs(safe_env().iter().map(|(k, v)| (k, v)))
        .status()
        .context("spawning the C floor launcher")?;
    if !st.success() {
        bail!("the C floor launcher failed: {st}");
    }
    Ok(())
}

fn section(bin: &PathBuf, floor_bin: &std::path::Path, n: usize) -> Result<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_round = (n / ROUNDS).max(1);
    let mut one = Server::start(bin, 1, "")?;
    let mut many = Server::start(bin, cpus, "")?;
    let mut bare = Server::start(bin, 1, LAYERS_OFF)?;
    let mut bare_n = Server::start(bin, cpus, LAYERS_OFF)?;
    // Warm-up: the servers' spawner threads, admission cache, page cache.
    one.batch(20)?;
    many.batch(20)?;
    bare.batch(20)?;
    bare_n.batch(20)?;
    time(20, one_plain)?;
    time(5, || one_floor(floor_bin))?;

    let mut plain = Vec::with_capacity(ROUNDS);
    let mut serve1 = Vec::with_capacity(ROUNDS);
    let mut serve_n = Vec::with_capacity(ROUNDS);
    let mut floor = Vec::with_capacity(ROUNDS);
    let mut engine = Vec::with_capacity(ROUNDS);
    let mut engine_n = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        // Rotate which runner goes first, so none always runs on a warmer machine.
        for k in 0..6 {
            match (round + k) % 6 {
                0 => plain.push(time(per_round, one_plain)?),
                1 => serve1.push(timed(|| one.batch(per_round))?),
                2 => serve_n.push(timed(|| many.batch(per_round))?),
                3 => engine.push(timed(|| bare.batch(per_round))?),
                4 => engine_n.push(timed(|| bare_n.batch(per_round))?),
                _ => floor.push(time(per_round, || one_floor(floor_bin))?),
            }
        }
    }
    one.stop()?;
    many.stop()?;
    bare.stop()?;
    bare_n.stop()?;

    let rps = |d: &Duration| per_round as f64 / d.as_secs_f64();
    let total =
        |v: &[Duration]| (per_round * v.len()) as f64 / v.iter().sum::<Duration>().as_secs_f64();
    let paired = |v: &[Duration]| {
        median(
            &v.iter()
                .zip(&plain)
                .map(|(s, p)| rps(s) / rps(p))
                .collect::<Vec<_>>(),
        )
    };
    let (p, s1, sn, fl, en, en_n) = (
        total(&plain),
        total(&serve1),
        total(&serve_n),
        total(&floor),
        total(&engine),
        total(&engine_n),
    );
    let ratio = s1 / p;
    let engine_ratio = en / p;

    let memory = memory(bin)?;

    let mut md = String::new();
    writeln!(md, "## serve: requests per second\n")?;
    writeln!(
        md,
        "{} requests of each kind (`/bin/true`, `minimal`), {ROUNDS} interleaved rounds of {per_round}; each server is one `sandbox serve` process started once, fed on stdin with a round's requests pipelined (all written, then all results read); requests per second over all rounds.\n",
        per_round * ROUNDS
    )?;
    writeln!(md, "| runner | requests/s | per request | rate per round |")?;
    writeln!(md, "|---|---|---|---|")?;
    writeln!(
        md,
        "| plain `Command::new(\"/bin/true\").status()` (same environment) | {p:.0} | {:.0} µs | {} |",
        1e6 / p,
        list(&plain, rps)
    )?;
    writeln!(
        md,
        "| `sandbox serve --max-concurrent 1` | {s1:.0} | {:.0} µs | {} |",
        1e6 / s1,
        list(&serve1, rps)
    )?;
    writeln!(
        md,
        "| `sandbox serve --max-concurrent {cpus}` (the CPUs) | {sn:.0} | {:.0} µs | {} |",
        1e6 / sn,
        list(&serve_n, rps)
    )?;
    writeln!(
        md,
        "| `sandbox serve --max-concurrent 1`, requests with `\"landlock\":\"off\",\"isolation\":\"off\"` (the engine alone) | {en:.0} | {:.0} µs | {} |",
        1e6 / en,
        list(&engine, rps)
    )?;
    writeln!(
        md,
        "| `sandbox serve --max-concurrent {cpus}`, the engine alone | {en_n:.0} | {:.0} µs | {} |",
        1e6 / en_n,
        list(&engine_n, rps)
    )?;
    writeln!(
        md,
        "| C floor launcher, one after another (`bench_floor::FLOOR_C`: the same namespaces, loopback up, `/proc`, `/tmp`, an init; nothing else) | {fl:.0} | {:.0} µs | {} |",
        1e6 / fl,
        list(&floor, rps)
    )?;
    writeln!(
        md,
        "\nRatio serve (concurrency 1) / plain: **{ratio:.2}** (target ≥ 0.90: {}); median of the {ROUNDS} paired round ratios: {:.2}. With concurrency {cpus}: {:.2} (median of pairs {:.2}).\n",
        if ratio >= 0.9 { "met" } else { "missed" },
        paired(&serve1),
        sn / p,
        paired(&serve_n),
    )?;
    writeln!(
        md,
        "The engine alone (the same server, requests without the Landlock and namespace layers) against plain: **{engine_ratio:.2}** (target ≥ 0.90: {}); median of pairs {:.2}. With concurrency {cpus}: {:.2} (median of pairs {:.2}), requests running side by side on the {cpus} CPUs where the plain loop runs one at a time.\n",
        if engine_ratio >= 0.9 { "met" } else { "missed" },
        paired(&engine),
        en_n / p,
        paired(&engine_n),
    )?;
    writeln!(
        md,
        "The C floor launcher, one request after another, reaches {:.2}x plain: a process per request doing nothing but the namespace work (creating the namespaces, bringing loopback up, mounting, and the kernel's teardown when the init exits). Serve at concurrency 1 runs at {:.2}x the floor (it saves the launcher's own exec): with fresh namespaces per request, run one after another, the namespace work alone keeps the rate far below 0.9x plain on this kernel.\n",
        fl / p,
        s1 / fl,
    )?;
    writeln!(
        md,
        "Server memory (`/proc/<pid>/status`, concurrency 1, kB): after 1,000 requests VmHWM {} / VmRSS {}; after 10,000 VmHWM {} / VmRSS {}.\n",
        memory[0].0, memory[0].1, memory[1].0, memory[1].1
    )?;
    Ok(md)
}

/// The shipped `sandbox` binary (the release bundle's build), built if needed; the one
/// `BENCH_SANDBOX` names instead when set (to compare two builds, run after run, with the same
/// benchmark).
pub(crate) fn sandbox_binary() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("BENCH_SANDBOX") {
        return Ok(PathBuf::from(bin));
    }
    // The binary users get: the release bundle's build (fully static where the musl target is
    // installed), not `target/release/sandbox`, whose dynamic loading and glibc start-up cost
    // more per command.
    Ok(xtask::dist::build_shipped(&crate::workspace::root(), "release")?.path)
}

/// Request fields that turn the Landlock and namespace layers off: the engine alone.
const LAYERS_OFF: &str = r#","landlock":"off","isolation":"off""#;

/// One `sandbox serve` on pipes.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    sent: usize,
    extra: &'static str,
}

impl Server {
    /// A server whose requests carry `extra` (JSON fields, each with a leading comma).
    fn start(bin: &PathBuf, concurrency: usize, extra: &'static str) -> Result<Server> {
        let mut child = Command::new(bin)
            .args(["serve", "--max-concurrent", &concurrency.to_string()])
            .env_clear()
            .envs(safe_env().iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting sandbox serve")?;
        Ok(Server {
            stdin: child.stdin.take().context("stdin")?,
            stdout: BufReader::new(child.stdout.take().context("stdout")?),
            child,
            line: String::new(),
            sent: 0,
            extra,
        })
    }

    /// Writes `n` requests, then reads their `n` results (each must be an exact run).
    fn batch(&mut self, n: usize) -> Result<()> {
        let mut text = String::new();
        for _ in 0..n {
            self.sent += 1;
            writeln!(
                text,
                r#"{{"id":"{}","argv":["/bin/true"]{}}}"#,
                self.sent, self.extra
            )?;
        }
        // A round's requests (50 short lines) fit in the pipe: no writer thread needed.
        self.stdin.write_all(text.as_bytes())?;
        self.stdin.flush()?;
        for _ in 0..n {
            self.line.clear();
            if self.stdout.read_line(&mut self.line)? == 0 {
                bail!("sandbox serve ended early");
            }
            if !self.line.contains(r#""exit_code":0,"#)
                || !self.line.contains(r#""filter":"exact""#)
            {
                bail!("sandbox serve: unexpected result {}", self.line.trim());
            }
        }
        Ok(())
    }

    /// Peak and current resident size in kB.
    fn memory(&self) -> Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .with_context(|| format!("{name} in /proc/<pid>/status"))
        };
        Ok((field("VmHWM:")?, field("VmRSS:")?))
    }

    fn stop(mut self) -> Result<()> {
        drop(self.stdin);
        let status = self.child.wait()?;
        if !status.success() {
            bail!("sandbox serve exited with {status}");
        }
        Ok(())
    }
}

/// The server's peak memory after 1,000 and after 10,000 requests.
fn memory(bin: &PathBuf) -> Result<[(u64, u64); 2]> {
    let mut s = Server::start(bin, 1, "")?;
    for _ in 0..20 {
        s.batch(50)?;
    }
    let after_1k = s.memory()?;
    for _ in 0..180 {
        s.batch(50)?;
    }
    let after_10k = s.memory()?;
    s.stop()?;
    Ok([after_1k, after_10k])
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn list(v: &[Duration], rps: impl Fn(&Duration) -> f64) -> String {
    v.iter()
        .map(|d| format!("{:.0}", rps(d)))
        .collect::<Vec<_>>()
        .join(", ")
}
