//! Per-syscall kernel cost under each built-in profile, as a ratio to no filter.
//!
//! perf's instruction counters are not available on every machine (not on this project's VM),
//! so this measures time: a small C program (compiled here with gcc) makes N calls in a tight
//! loop, several rounds, and reports the median nanoseconds per call for
//!
//! - `getppid`: an allowed, argument-free call (the kernel's seccomp cache can answer it
//!   without running the filter);
//! - `openat(-1, "x", O_RDONLY)`: allowed through an argument rule (the filter runs on every
//!   call; the call itself fails at once with EBADF);
//! - `clone3(NULL, 0)`: denied with ENOSYS by every filtered profile (without a filter the
//!   kernel answers EINVAL at once).
//!
//! Every profile runs in the same invocation as the unfiltered baseline, interleaved, so the
//! ratios compare like with like.

use anyhow::{bail, Context, Result};
use sandbox_policy::profile::Profile;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C helpers every loop program of the benchmarks starts with: a monotonic clock in
/// nanoseconds and a comparison of doubles for `qsort` (medians). It defines `_GNU_SOURCE`
/// before its includes, so it comes first.
pub const TIMING_C: &str = r#"
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

"#;

const BENCH_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double one(int which, long n) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
        switch (which) {
        case 0: syscall(SYS_getppid); break;
        case 1: syscall(SYS_openat, -1, "x", O_RDONLY); break;
        default: syscall(SYS_clone3, NULL, 0); break;
        }
    }
    return (now() - t0) / n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (rounds < 1 || rounds > 101) return 2;
    const char *names[] = {"getppid", "openat", "clone3"};
    for (int w = 0; w < 3; w++) {
        double v[101];
        one(w, n / 10);
        for (int r = 0; r < rounds; r++) v[r] = one(w, n);
        qsort(v, rounds, sizeof v[0], cmp);
        printf("%s %.2f\n", names[w], v[rounds / 2]);
    }
    return 0;
}
"#;

/// The calls measured, in the program's output order.
pub const CALLS: &[&str] = &["getppid", "openat", "clone3"];

fn compile() -> Result<PathBuf> {
    let work = std::env::temp_dir().join(format!("sandbox-bench-syscalls-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let src = work.join("bench.c");
    std::fs::write(&src, format!("{TIMING_C}{BENCH_C}"))?;
    let bin = work.join("bench");
    let out = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .context("running gcc")?;
    if !out.status.success() {
        bail!("gcc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(bin)
}

/// Nanoseconds per call for each of [`CALLS`] under `profile`.
fn measure(bin: &Path, so: &Path, profile: &str, n: u64, rounds: u32) -> Result<Vec<f64>> {
    let mut cmd = Command::new(bin);
    cmd.arg(n.to_string())
        .arg(rounds.to_string())
        .env_remove("LD_PRELOAD");
    let env = Profile::builtin(profile)?.env(None);
    if !env.is_empty() {
        cmd.env("LD_PRELOAD", so)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    }
    let out = cmd.output()?;
    if !out.status.success() {
        bail!(
            "bench under {profile}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for (line, want) in text.lines().zip(CALLS) {
        let (name, ns) = line.split_once(' ').context("bench output")?;
        if name != *want {
            bail!("bench output: expected {want}, got {line}");
        }
        v.push(ns.parse()?);
    }
    if v.len() != CALLS.len() {
        bail!("bench under {profile}: short output {text:?}");
    }
    Ok(v)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the benchmark; returns a Markdown section (`## Per-syscall cost ...`).
pub fn run() -> Result<String> {
    run_with(100_000, 7, 3)
}

/// [`run`] with `n` calls per round, `rounds` rounds per process, and `repeats` interleaved
/// processes per profile (the median of their medians is reported).
pub fn run_with(n: u64, rounds: u32, repeats: usize) -> Result<String> {
    let so = crate::matrix::preload()?;
    let bin = compile()?;
    let result = measure_all(&bin, &so, n, rounds, repeats);
    let _ = std::fs::remove_dir_all(bin.parent().expect("bench has a directory"));
    result
}

fn measure_all(bin: &Path, so: &Path, n: u64, rounds: u32, repeats: usize) -> Result<String> {
    let profiles = crate::matrix::PROFILES;
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); CALLS.len()]; profiles.len()];
    for _ in 0..repeats {
        for (i, p) in profiles.iter().enumerate() {
            for (j, ns) in measure(bin, so, p, n, rounds)?.into_iter().enumerate() {
                samples[i][j].push(ns);
            }
        }
    }
    let med: Vec<Vec<f64>> = samples
        .iter_mut()
        .map(|s| s.iter_mut().map(|c| median(c)).collect())
        .collect();
    let base = profiles
        .iter()
        .position(|p| *p == "unrestricted")
        .expect("unrestricted is a profile");
    let mut s = String::from("## Per-syscall cost under each profile\n\n");
    s.push_str(&format!(
        "Nanoseconds per call (median of {repeats} processes x {rounds} rounds x {n} calls, \
         time not instructions: perf counters are not available here) and the ratio to no \
         filter (`unrestricted`) measured in the same run. `getppid` is allowed without \
         arguments (the kernel's seccomp cache answers it); `openat(-1, \"x\", O_RDONLY)` is \
         allowed through an argument rule (the filter runs on each call; the call fails at once \
         with EBADF); `clone3(NULL, 0)` is denied with ENOSYS by every filtered profile.\n\n"
    ));
    s.push_str("| profile |");
    for c in CALLS {
        s.push_str(&format!(" {c} ns | {c} ratio |"));
    }
    s.push_str("\n|---|");
    for _ in CALLS {
        s.push_str("---:|---:|");
    }
    s.push('\n');
    for (i, p) in profiles.iter().enumerate() {
        let name = if i == base {
            "no filter (unrestricted)".to_string()
        } else {
            p.to_string()
        };
        s.push_str(&format!("| {name} |"));
        for (ns, base_ns) in med[i].iter().zip(&med[base]) {
            s.push_str(&format!(" {ns:.1} | {:.2}x |", ns / base_ns));
        }
        s.push('\n');
    }
    Ok(s)
}
