//! `cargo xtask bench`, file-size search section: what the search for a write cut at the
//! file-size limit costs a request in a large workspace. A JSON or library request runs with
//! `RLIMIT_FSIZE` (64 MiB by default), and a descendant killed by it is seen only by the file
//! it left, searched for after the run (`exec/hits.rs`); a run known to have written nothing
//! skips that search where the file system counts writes. Rows: a request that writes nothing
//! and one that writes a line, each in an empty workspace and in one of 20,000 files (the
//! search's budget), through `sandbox_host::exec` with the `shell` profile and default layers.

use anyhow::{bail, Context, Result};
use sandbox_host::exec::{self, Request};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Directories and files per directory of the large workspace: 20,000 entries in all.
const DIRS: usize = 100;
const FILES: usize = 199;

/// Runs `rounds` interleaved rounds of `per_round` requests of each kind; a Markdown section.
pub fn run(rounds: usize, per_round: usize) -> Result<String> {
    let base = crate::workspace::root().join("target/bench-fsize");
    let _ = std::fs::remove_dir_all(&base);
    let (empty, large) = (base.join("empty"), base.join("large"));
    std::fs::create_dir_all(&empty).context("creating the empty workspace")?;
    for d in 0..DIRS {
        let dir = large.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).context("creating the large workspace")?;
        for f in 0..FILES {
            std::fs::write(dir.join(format!("f{f:03}")), b"x")?;
        }
    }
    let entries = DIRS * (FILES + 1);
    // Runs that wrote nothing skip the search on ext2/3/4 only (exec/hits.rs).
    let fs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(&base)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let kinds: [(&str, &Path, &str); 4] = [
        ("`true`, empty workspace", &empty, "true"),
        (
            "`true`, workspace of 20,000 entries (wrote nothing)",
            &large,
            "true",
        ),
        ("`echo x > out`, empty workspace", &empty, "echo x > out"),
        (
            "`echo x > out`, workspace of 20,000 entries (wrote)",
            &large,
            "echo x > out",
        ),
    ];
    for (_, dir, script) in &kinds {
        one(dir, script)?;
    }
    let mut times = vec![Vec::with_capacity(rounds); kinds.len()];
    for round in 0..rounds {
        for i in 0..kinds.len() {
            let k = (round + i) % kinds.len();
            let (_, dir, script) = kinds[k];
            let t = Instant::now();
            for _ in 0..per_round {
                one(dir, script)?;
            }
            times[k].push(t.elapsed() / per_round as u32);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    let med: Vec<f64> = times.iter().map(|t| median_ms(t)).collect();

    let mut md = String::from("## File-size search: a request in a large workspace\n\n");
    writeln!(
        md,
        "Wall time per request through `sandbox_host::exec` (`sh -c`, profile `shell`, default layers and limits: `RLIMIT_FSIZE` 64 MiB), median of {rounds} interleaved rounds of {per_round}; the large workspace holds {entries} entries (100 directories of 199 one-byte files), the file-size search's budget, on {fs} (a run that wrote nothing skips the search on ext2/3/4 only, `stat -f` calls them `ext2/ext3`).\n"
    )?;
    writeln!(
        md,
        "| request | ms per request | vs the same in an empty workspace |"
    )?;
    writeln!(md, "|---|---:|---:|")?;
    for (k, (name, _, _)) in kinds.iter().enumerate() {
        writeln!(
            md,
            "| {name} | {:.2} | {:.2}x |",
            med[k],
            med[k] / med[k - k % 2]
        )?;
    }
    writeln!(
        md,
        "\nIn the large workspace, a run that wrote nothing costs {:+.2} ms, one that wrote a line {:+.2} ms.\n",
        med[1] - med[0],
        med[3] - med[2]
    )?;
    Ok(md)
}

/// One request: `sh -c script` in `dir`, which must succeed without a limit hit.
fn one(dir: &Path, script: &str) -> Result<()> {
    let r = Request::builder(["/bin/sh", "-c", script])
        .profile("shell")
        .cwd(dir.to_string_lossy())
        .build();
    let r = exec::exec(&r).with_context(|| format!("exec {script}"))?;
    if r.exit_code != Some(0) || !r.limits_hit.is_empty() {
        bail!("exec {script}: {r:?}");
    }
    Ok(())
}

/// The median (upper middle) of `v`, in milliseconds.
fn median_ms(v: &[Duration]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}
