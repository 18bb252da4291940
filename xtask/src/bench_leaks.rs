//! `cargo xtask bench`, leak-scan section: what searching a request's output for secrets and
//! token shapes costs on 4 MiB of output, alone (CPU time of the scan in this thread) and in a
//! whole request (`/bin/cat` of a 4 MiB file through `sandbox_host::exec`, with and without
//! `secret_env` and `redact_secrets`, interleaved rounds, medians of wall and CPU time).

use anyhow::{bail, Context, Result};
use sandbox_host::exec::{self, leaks::Scanner, Request};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const SIZE: usize = 4 * 1024 * 1024;
const SECRET: &str = "s3cr3t-Value/with+chars";

/// 4 MiB of what tools print: log lines with paths, hashes, numbers and some base64.
fn log_text() -> String {
    let mut s = String::with_capacity(SIZE + 200);
    let mut i = 0u64;
    while s.len() < SIZE {
        i += 1;
        let _ = writeln!(
            s,
            "2026-01-01T00:00:{:02} INFO worker[{i}] GET /api/v1/items/{i}?page=2 200 {}ms sha=d41d8cd98f00b204e9800998ecf8427e{:08x} blob=SGVsbG8gd29ybGQgdGhpcyBpcyBi{i}",
            i % 60,
            i % 997,
            i
        );
    }
    s.truncate(SIZE);
    s
}

/// 4 MiB of base64 lines (76 characters), the worst case: every line is decoded.
fn base64_text() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(SIZE + 100);
    let mut x: u32 = 12345;
    while s.len() < SIZE {
        for _ in 0..76 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            s.push(alphabet[(x >> 16) as usize % 64] as char);
        }
        s.push('\n');
    }
    s.truncate(SIZE);
    s
}

/// CPU time used by this thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time (user + system) of this process and its reaped children.
fn process_cpu() -> Duration {
    let mut total = Duration::ZERO;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills a zeroed local struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(who, &mut ru) };
        for tv in [ru.ru_utime, ru.ru_stime] {
            total += Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000);
        }
    }
    total
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median CPU milliseconds of one scan (and redaction) of `text`.
fn scan_ms(scanner: &Scanner, text: &str, redact: bool, rounds: usize) -> f64 {
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = thread_cpu();
        std::hint::black_box(scanner.scan_and_redact("stdout", text, redact));
        v.push((thread_cpu() - t).as_secs_f64() * 1e3);
    }
    median(v)
}

/// Runs the section; `rounds` interleaved rounds of each variant.
pub fn run(rounds: usize) -> Result<String> {
    let mut md = String::from("## Leak scan: 4 MiB of output\n\n");
    let one = Scanner::new(&[("API_TOKEN".into(), SECRET.into())]);
    let shapes = Scanner::shapes_only();
    let log = log_text();
    let b64 = base64_text();
    writeln!(
        md,
        "The scan alone, CPU time of this thread, median of {rounds} rounds (`Scanner` in `host/src/exec/leaks.rs`):\n"
    )?;
    writeln!(
        md,
        "| output (4 MiB) | shapes only | + one `secret_env` | + `redact_secrets` |"
    )?;
    writeln!(md, "|---|---|---|---|")?;
    for (name, text) in [("log lines", &log), ("base64 lines (worst case)", &b64)] {
        writeln!(
            md,
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
            scan_ms(shapes, text, false, rounds),
            scan_ms(&one, text, false, rounds),
            scan_ms(&one, text, true, rounds)
        )?;
    }

    // Whole requests: `cat` of the log file, the largest output a request keeps.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("out.txt");
    std::fs::write(&file, &log)?;
    let plain = {
        let mut r = Request::new(["/bin/cat", file.to_str().unwrap()]);
        r.max_output_bytes = SIZE as u64;
        r
    };
    let mut secret = plain.clone();
    secret.env.insert("API_TOKEN".into(), SECRET.into());
    secret.secret_env = vec!["API_TOKEN".into()];
    secret.redact_secrets = true;
    let once = |r: &Request| -> Result<(f64, f64)> {
        let (w, c) = (Instant::now(), process_cpu());
        let res = exec::exec(r).context("exec cat")?;
        if res.exit_code != Some(0) || res.stdout.len() != SIZE {
            bail!("cat of 4 MiB: {:?} {}", res.exit_code, res.stdout.len());
        }
        Ok((
            w.elapsed().as_secs_f64() * 1e3,
            (process_cpu() - c).as_secs_f64() * 1e3,
        ))
    };
    for _ in 0..3 {
        once(&plain)?;
        once(&secret)?;
    }
    let (mut pw, mut pc, mut sw, mut sc) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        let order: [&Request; 2] = if round % 2 == 0 {
            [&plain, &secret]
        } else {
            [&secret, &plain]
        };
        for r in order {
            let (w, c) = once(r)?;
            if std::ptr::eq(r, &plain) {
                pw.push(w);
                pc.push(c);
            } else {
                sw.push(w);
                sc.push(c);
            }
        }
    }
    let (pw, pc, sw, sc) = (median(pw), median(pc), median(sw), median(sc));
    writeln!(
        md,
        "\nA whole request, `/bin/cat` of 4 MiB of log lines (`max_output_bytes` 4 MiB), {rounds} interleaved rounds, medians:\n"
    )?;
    writeln!(md, "| request | wall ms | CPU ms (host + program) |")?;
    writeln!(md, "|---|---|---|")?;
    writeln!(md, "| shapes only (every request) | {pw:.1} | {pc:.1} |")?;
    writeln!(
        md,
        "| + `secret_env` and `redact_secrets` | {sw:.1} | {sc:.1} |"
    )?;
    writeln!(
        md,
        "\nRatio with / without a secret: wall **{:.2}**, CPU **{:.2}**.\n",
        sw / pw,
        sc / pc
    )?;
    Ok(md)
}
