//! `cargo xtask bench --session`: commands per second in a warm session
//! (`sandbox_host::session`), `/bin/true` under `minimal`, one at a time and at the machine's
//! concurrency, against a plain `std::process::Command` spawn loop of `/bin/true` in the same
//! run (interleaved rounds, median of the per-round ratios); the host's CPU time per command;
//! the memory of the host and of an idle session; and whether either grows over many commands.

use crate::bench_exec::{median, one_plain, time};
use anyhow::{bail, Context, Result};
use sandbox_host::exec::Request;
use sandbox_host::session::{Command, Session, SessionOptions};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Rounds the commands are split into (the runners take turns, round by round).
const ROUNDS: usize = 20;

/// Runs `n` commands of each kind, then `growth` more in the session for the memory figures.
pub fn run(n: usize, growth: usize) -> Result<String> {
    let bin = crate::bench_serve::sandbox_binary()?;
    let dir = tempfile::tempdir()?;
    let policy = Request::builder(["/bin/true"])
        .profile("minimal")
        .cwd(dir.path().to_string_lossy())
        .build();
    let session = Session::start(&policy, &SessionOptions::new(&bin))
        .map_err(|e| anyhow::anyhow!("starting a session: {} {}", e.field(), e.reason()))?;
    // The same session in a git repository: the repository's control files are checked after
    // every command (module `git_guard`), which a directory outside any repository skips.
    let repo = tempfile::tempdir()?;
    git_repository(repo.path(), REPO_FILES)?;
    let in_repo = Request::builder(["/bin/true"])
        .profile("minimal")
        .cwd(repo.path().to_string_lossy())
        .build();
    let repo_session = Session::start(&in_repo, &SessionOptions::new(&bin))
        .map_err(|e| anyhow::anyhow!("starting a session: {} {}", e.field(), e.reason()))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_round = (n / ROUNDS).max(cpus);
    let one = || one_session(&session);
    let one_repo = || one_session(&repo_session);
    // Warm-up: page cache, the session's first fork, the profile's plan.
    time(50, one)?;
    time(50, one_repo)?;
    time(50, one_plain)?;

    let (mut plain1, mut sess1, mut plain_n, mut sess_n) = (vec![], vec![], vec![], vec![]);
    let mut repo1 = vec![];
    let (mut cpu_plain, mut cpu_sess, mut cpu_repo) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for round in 0..ROUNDS {
        for k in 0..5 {
            match (round + k) % 5 {
                4 => {
                    let c = cpu();
                    repo1.push(time(per_round, one_repo)?);
                    cpu_repo += cpu() - c;
                }
                0 => {
                    let c = cpu();
                    plain1.push(time(per_round, one_plain)?);
                    cpu_plain += cpu() - c;
                }
                1 => {
                    let c = cpu();
                    sess1.push(time(per_round, one)?);
                    cpu_sess += cpu() - c;
                }
                2 => plain_n.push(parallel(cpus, per_round, one_plain)?),
                _ => sess_n.push(parallel(cpus, per_round, one)?),
            }
        }
    }
    let rps = |d: &Duration| per_round as f64 / d.as_secs_f64();
    let ratio = |s: &[Duration], p: &[Duration]| {
        median(
            &s.iter()
                .zip(p)
                .map(|(s, p)| rps(s) / rps(p))
                .collect::<Vec<_>>(),
        )
    };
    let total =
        |v: &[Duration]| (per_round * v.len()) as f64 / v.iter().sum::<Duration>().as_secs_f64();
    let per_cmd = |d: Duration| d.as_secs_f64() * 1e6 / (per_round * ROUNDS) as f64;

    // Memory: idle, then after `growth` more commands.
    std::thread::sleep(Duration::from_millis(200));
    let before = Memory::now()?;
    let t = Instant::now();
    time(growth, one)?;
    let growth_s = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    let after = Memory::now()?;
    session.end();
    repo_session.end();

    let mut md = String::new();
    writeln!(md, "## session: commands per second\n")?;
    writeln!(
        md,
        "{} commands of each kind (`/bin/true`, `minimal`, every layer this machine has), {ROUNDS} interleaved rounds of {per_round}; the session is started once; concurrency {cpus} (the machine's CPUs) runs {cpus} threads each starting commands one after another. Ratio: median over the rounds of the session's rate over the plain loop's rate in the same round.\n",
        per_round * ROUNDS
    )?;
    writeln!(
        md,
        "| runner | commands/s | ratio to plain (median of rounds) |"
    )?;
    writeln!(md, "|---|---|---|")?;
    writeln!(
        md,
        "| plain `Command::new(\"/bin/true\").status()`, one at a time | {:.0} | 1 |",
        total(&plain1)
    )?;
    writeln!(
        md,
        "| session `spawn(/bin/true).wait()`, one at a time | {:.0} | {:.2}x |",
        total(&sess1),
        ratio(&sess1, &plain1)
    )?;
    writeln!(
        md,
        "| session in a git repository of {REPO_FILES} files, one at a time | {:.0} | {:.2}x |",
        total(&repo1),
        ratio(&repo1, &plain1)
    )?;
    writeln!(
        md,
        "| plain, {cpus} at a time | {:.0} | 1 |",
        total(&plain_n)
    )?;
    writeln!(
        md,
        "| session, {cpus} at a time | {:.0} | {:.2}x |\n",
        total(&sess_n),
        ratio(&sess_n, &plain_n)
    )?;
    writeln!(
        md,
        "Host CPU time per command, one at a time (user + system of the calling process, with its reaped children for the plain loop): plain {:.0} µs, session {:.0} µs, session in a git repository {:.0} µs (the check of the repository's and the agents' control files after every command; the resident's clone and the command's own start are in the session's processes, not counted here).\n",
        per_cmd(cpu_plain),
        per_cmd(cpu_sess),
        per_cmd(cpu_repo)
    )?;
    writeln!(
        md,
        "| memory (VmRSS) | idle session | after {growth} more commands ({growth_s:.1} s) |"
    )?;
    writeln!(md, "|---|---|---|")?;
    writeln!(
        md,
        "| host process (library, threads) | {} KiB | {} KiB |",
        before.host_kib, after.host_kib
    )?;
    writeln!(
        md,
        "| host descriptors | {} | {} |",
        before.host_fds, after.host_fds
    )?;
    writeln!(
        md,
        "| resident process | {} KiB | {} KiB |",
        before.resident_kib, after.resident_kib
    )?;
    writeln!(
        md,
        "| namespaces' init | {} KiB | {} KiB |\n",
        before.init_kib, after.init_kib
    )?;
    Ok(md)
}

/// Files of the repository the session in a repository runs in.
const REPO_FILES: usize = 500;

/// A git repository at `dir` with `files` files committed.
fn git_repository(dir: &std::path::Path, files: usize) -> Result<()> {
    for i in 0..files {
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n"))?;
    }
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "files",
        ],
    ] {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .context("running git")?;
        if !st.success() {
            bail!("git {args:?} failed");
        }
    }
    Ok(())
}

fn one_session(s: &Session) -> Result<()> {
    let r = s
        .spawn(&Command::new(["/bin/true"]))
        .map_err(|e| anyhow::anyhow!("{}: {}", e.field(), e.reason()))?
        .wait();
    if r.exit_code != Some(0) {
        bail!("/bin/true in the session: {r:?}");
    }
    Ok(())
}

/// `n` calls of `f` on `threads` threads; the wall time.
fn parallel(threads: usize, n: usize, f: impl Fn() -> Result<()> + Sync) -> Result<Duration> {
    let t = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let f = &f;
                s.spawn(move || time(n / threads + usize::from(i < n % threads), f))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a bench thread panicked"))?
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(t.elapsed())
}

/// User and system time of this process and its reaped children.
fn cpu() -> Duration {
    let mut total = Duration::ZERO;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage writes into a zeroed local.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(who, &mut u) };
        for tv in [u.ru_utime, u.ru_stime] {
            total +=
                Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64);
        }
    }
    total
}

struct Memory {
    host_kib: u64,
    host_fds: usize,
    resident_kib: u64,
    init_kib: u64,
}

impl Memory {
    fn now() -> Result<Memory> {
        let resident = std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.ends_with(b"__session-resident\0"))
                    && ppid(ppid(*pid)) == std::process::id()
            })
            .context("finding the session's resident process")?;
        Ok(Memory {
            host_kib: rss("self")?,
            host_fds: std::fs::read_dir("/proc/self/fd")?.count(),
            resident_kib: rss(&resident.to_string())?,
            init_kib: rss(&ppid(resident).to_string())?,
        })
    }
}

fn ppid(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("PPid:")
                    .map(|p| p.trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

fn rss(pid: &str) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS")
}
