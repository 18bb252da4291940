//! `cargo xtask bench --opens`: what the host's making of a job's opens that may write and its
//! metadata calls costs (docs/isolation.md, "Hard links"), in a workspace that holds a uv venv
//! linked from uv's cache and a pnpm `node_modules` linked from pnpm's store, made with the
//! real tools (`uv` and `pnpm` on `PATH`, or `BENCH_LINK_TOOLS`: a directory with
//! `venv/bin/uv` and `node_modules/.bin/pnpm`, as `host/tests/hard_links.rs` installs them).
//!
//! Each workload is a whole `sandbox run --profile shell` as root, its CPU time (user +
//! system of the `sandbox` process and its children), in interleaved rounds: the build
//! measured (`BENCH_SANDBOX`, else the shipped build) and the build before it
//! (`BENCH_SANDBOX_BASE`, when given: the A/B), each in the isolated tier (the default) and
//! the contained one (`--isolation off`), and the same build in the filtered tier
//! (`--isolation off --landlock off`: nothing claimed).

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workloads: (name, script run by `bash -c` in the workspace).
const WORKLOADS: [(&str, &str); 3] = [
    (
        "tests that only read: `import six` and `require('is-number')`",
        ".venv/bin/python -c 'import six' && node -e \"require('is-number')\"",
    ),
    (
        "2,000 opens that write (`open(f, 'w')` of 20 files in turn)",
        ".venv/bin/python -c 'for i in range(2000): open(\"out%d\" % (i % 20), \"w\").write(\"x\")'",
    ),
    (
        "`tar x` of the `node_modules` tree (files made with `O_EXCL`; each file's times and mode set)",
        "rm -rf unpacked && mkdir unpacked && tar xf ../tree.tar -C unpacked",
    ),
];

fn tool(name: &str, under: &str) -> PathBuf {
    match std::env::var_os("BENCH_LINK_TOOLS") {
        Some(d) => Path::new(&d).join(under),
        None => PathBuf::from(name),
    }
}

fn ok(c: &mut Command, what: &str) -> Result<()> {
    let o = c.output().with_context(|| what.to_string())?;
    if !o.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok(())
}

/// The workspace: a uv venv with `six`, a pnpm `node_modules` with `is-number`, both linked
/// from stores beside it; and `tree.tar`, the `node_modules` tree as an archive.
fn workspace(root: &Path) -> Result<PathBuf> {
    let ws = root.join("ws");
    std::fs::create_dir(&ws)?;
    let (uv, pnpm) = (
        tool("uv", "venv/bin/uv"),
        tool("pnpm", "node_modules/.bin/pnpm"),
    );
    let cache = root.join("uv-cache");
    ok(
        Command::new(&uv)
            .args(["venv", "-q", "--cache-dir"])
            .arg(&cache)
            .arg(ws.join(".venv")),
        "uv venv",
    )?;
    ok(
        Command::new(&uv)
            .args(["pip", "install", "-q", "--cache-dir"])
            .arg(&cache)
            .arg("six==1.16.0")
            .env("VIRTUAL_ENV", ws.join(".venv")),
        "uv pip install six",
    )?;
    std::fs::write(ws.join("package.json"), r#"{"name":"b","version":"1.0.0"}"#)?;
    ok(
        Command::new(&pnpm)
            .args([
                "add",
                "--silent",
                "is-number@7.0.0",
                "typescript@5.6.3",
                "--store-dir",
            ])
            .arg(root.join("pnpm-store"))
            .current_dir(&ws),
        "pnpm add",
    )?;
    ok(
        Command::new("tar")
            .arg("chf")
            .arg(root.join("tree.tar"))
            .arg("node_modules")
            .current_dir(&ws),
        "tar c",
    )?;
    Ok(ws)
}

/// CPU milliseconds of one run of `script` under `sandbox` with `extra` arguments.
fn one(sandbox: &Path, extra: &[&str], ws: &Path, script: &str) -> Result<f64> {
    let before = crate::bench_landlock::children_cpu();
    let o = Command::new(sandbox)
        .args(["run", "--allow-root", "--profile", "shell"])
        .args(extra)
        .args(["--", "bash", "-c", script])
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/root")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .context("sandbox run")?;
    if !o.status.success() {
        bail!("{script}: {}", String::from_utf8_lossy(&o.stderr));
    }
    Ok((crate::bench_landlock::children_cpu() - before) * 1e3)
}

/// The section: `rounds` interleaved rounds of `per` runs of each variant and workload.
pub fn run(rounds: usize, per: usize) -> Result<String> {
    let sandbox = crate::bench_serve::sandbox_binary()?;
    let base = std::env::var_os("BENCH_SANDBOX_BASE").map(PathBuf::from);
    let root = tempfile::Builder::new()
        .prefix("bench-opens")
        .tempdir_in("/var/tmp")?;
    let ws = workspace(root.path())?;
    let load = crate::bench_landlock::load;
    let load_before = load();
    let mut variants: Vec<(String, PathBuf, Vec<&str>)> = Vec::new();
    for (tier, args) in [
        ("isolated", vec![]),
        ("contained", vec!["--isolation", "off"]),
    ] {
        variants.push((format!("this build, {tier}"), sandbox.clone(), args.clone()));
        if let Some(b) = &base {
            variants.push((format!("the build before, {tier}"), b.clone(), args));
        }
    }
    variants.push((
        "this build, filtered".into(),
        sandbox.clone(),
        vec!["--isolation", "off", "--landlock", "off"],
    ));
    let med = crate::bench_exec::median;
    let mut md = String::new();
    writeln!(
        md,
        "## Opens that may write: the host's opens in a linked workspace\n"
    )?;
    writeln!(
        md,
        "CPU ms of a whole `sandbox run --allow-root --profile shell -- bash -c ...` as root, in a workspace holding a uv venv linked from uv's cache and a pnpm `node_modules` linked from pnpm's store; {rounds} interleaved rounds of {per} runs of each variant, each round's median, the table the median of rounds.\n"
    )?;
    let header: Vec<&str> = variants.iter().map(|v| v.0.as_str()).collect();
    writeln!(md, "| workload | {} |", header.join(" | "))?;
    writeln!(md, "|---|{}", "---:|".repeat(variants.len()))?;
    for (name, script) in WORKLOADS {
        for v in &variants {
            one(&v.1, &v.2, &ws, script)?;
        }
        let mut rounds_of: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for round in 0..rounds {
            let mut runs: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
            for i in 0..per {
                // A different variant goes first each time.
                for k in 0..variants.len() {
                    let j = (k + round + i) % variants.len();
                    let v = &variants[j];
                    runs[j].push(one(&v.1, &v.2, &ws, script)?);
                }
            }
            for (j, r) in runs.iter().enumerate() {
                rounds_of[j].push(med(r));
            }
        }
        let cells: Vec<String> = rounds_of.iter().map(|r| format!("{:.1}", med(r))).collect();
        writeln!(md, "| {name} | {} |", cells.join(" | "))?;
    }
    writeln!(
        md,
        "\nLoad average {load_before} before, {} after.\n",
        load()
    )?;
    Ok(md)
}
