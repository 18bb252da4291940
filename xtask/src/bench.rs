//! `cargo xtask bench`: measured costs, written to `docs/benchmarks.md`.
//!
//! Every figure is a ratio against a baseline measured in the same run, in interleaved rounds,
//! because these machines are noisy. `perf stat -e instructions` is used when the machine
//! supports it; on VMs without counters the figures are wall-time medians (said in the output).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A 100-name allow list of real, argument-free syscalls (plain names from @base, @fd-io and
/// @fs-read), the size of a real profile.
pub fn hundred_names() -> String {
    let mut names = Vec::new();
    for g in ["base", "fd-io", "fs-read"] {
        let group = sandbox_policy::groups::find(g).expect("group exists");
        for e in group.entries {
            let plain = e
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if plain && sandbox_policy::NATIVE.syscall_number(e).is_some() && names.len() < 100 {
                names.push(e.to_string());
            }
        }
    }
    assert_eq!(names.len(), 100, "the groups hold at least 100 plain names");
    names.join(":")
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Times one run of a command (µs), failing if it fails.
fn spawn_once(mut c: Command) -> Result<f64> {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let t = Instant::now();
    let status = c.status().context("spawning benchmark command")?;
    let us = t.elapsed().as_secs_f64() * 1e6;
    if !status.success() {
        bail!("benchmark command {c:?} failed: {status}");
    }
    Ok(us)
}

/// Runs the variants in turn, one spawn each, `n` times over (so drift hits all alike);
/// returns each variant's median wall time in µs.
pub fn interleaved(variants: &[&dyn Fn() -> Command], n: usize) -> Result<Vec<f64>> {
    let mut times = vec![Vec::with_capacity(n); variants.len()];
    for _ in 0..n {
        for (v, make) in variants.iter().enumerate() {
            times[v].push(spawn_once(make())?);
        }
    }
    Ok(times.iter_mut().map(|t| median(t)).collect())
}

/// `perf stat` user+kernel instruction counts of one run, when the machine has counters.
fn perf_instructions(args: &[&str], envs: &[(&str, &str)]) -> Option<(f64, f64)> {
    let out = Command::new("perf")
        .args([
            "stat",
            "-x,",
            "-r",
            "50",
            "-e",
            "instructions:u,instructions:k",
            "--",
        ])
        .args(args)
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let mut u = None;
    let mut k = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() > 2 {
            let v = f[0].parse::<f64>().ok();
            if f[2].starts_with("instructions:u") {
                u = v;
            } else if f[2].starts_with("instructions:k") {
                k = v;
            }
        }
    }
    Some((u?, k?))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = Command::new("uname")
        .arg("-r")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let date = Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("{date}; kernel {kernel}; {cores} cores; {cpu}")
}

/// Startup cost of `/bin/true` with the preload and a 100-name allow list, against plain
/// `env /bin/true`, plus the library's size.
fn preload_startup(so: &Path, rounds: usize, per_round: usize) -> Result<String> {
    let so_s = so.display().to_string();
    let names = hundred_names();
    let base = || {
        let mut c = Command::new("/usr/bin/env");
        c.arg("/bin/true");
        c
    };
    let loaded = || {
        let mut c = Command::new("/usr/bin/env");
        c.arg(format!("LD_PRELOAD={so_s}")).arg("/bin/true");
        c
    };
    let filtered = || {
        let mut c = Command::new("/usr/bin/env");
        c.arg(format!("LD_PRELOAD={so_s}"))
            .arg(format!("SECCOMP_SYSCALL_ALLOW={names}"))
            .arg("/bin/true");
        c
    };
    let mut out = String::new();
    out += "## Preload start-up: `/bin/true` with a 100-name allow list\n\n";
    let size = std::fs::metadata(so)?.len();
    out += &format!(
        "Stripped `libsandbox.so`: **{size} bytes** ({:.0} KB; target at most 200 KB).\n\n",
        size as f64 / 1024.0
    );

    let perf_base = perf_instructions(&["/usr/bin/env", "/bin/true"], &[]);
    let allow_env = format!("SECCOMP_SYSCALL_ALLOW={names}");
    let preload_env = format!("LD_PRELOAD={so_s}");
    let perf_filt = perf_instructions(
        &["/usr/bin/env", &preload_env, &allow_env, "/bin/true"],
        &[],
    );
    match (perf_base, perf_filt) {
        (Some((bu, bk)), Some((fu, fk))) => {
            out += &format!(
                "Instructions (perf, user + kernel): `env /bin/true` {:.2} M, with the preload and 100 names {:.2} M: **{:.2}x** (target at most 1.25x).\n\n",
                (bu + bk) / 1e6,
                (fu + fk) / 1e6,
                (fu + fk) / (bu + bk)
            );
        }
        _ => out += "Instruction counters: `perf stat -e instructions` is not supported on this machine (a VM without PMU access), so the figures below are wall-time medians only.\n\n",
    }

    let m = interleaved(&[&base, &loaded, &filtered], rounds * per_round)?;
    let (mb, ml, mf) = (m[0], m[1], m[2]);
    let n = rounds * per_round;
    out += &format!(
        "Wall time, median of {n} spawns of each variant, the variants taking turns spawn by spawn:\n\n\
         | variant | µs per spawn | vs `env /bin/true` |\n|---|---|---|\n\
         | `env /bin/true` | {mb:.0} | 1.00x |\n\
         | + `LD_PRELOAD=libsandbox.so` (no variables: no filter) | {ml:.0} | {:.2}x |\n\
         | + `SECCOMP_SYSCALL_ALLOW=<100 names>` | {mf:.0} | **{:.2}x** |\n\n",
        ml / mb,
        mf / mb
    );
    Ok(out)
}

/// Kernel time to attach our tree-shaped program and seccompiler's linear chain for the same
/// 100 names, each in a fresh forked child (median of `n`).
fn attach_cost(n: usize) -> Result<String> {
    use sandbox_policy::{grammar, Action, Mode, Policy, NATIVE};
    let names = hundred_names();
    let mut p = Policy::new(NATIVE, Mode::AllowList, Action::Kill);
    grammar::from_env(NATIVE, Some(&names), None, Some("errno"), &mut p)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let ours = sandbox_policy::bpf::compile_vec(&p).map_err(|e| anyhow::anyhow!("{e}"))?;

    let mut rules = std::collections::BTreeMap::new();
    for name in names.split(':') {
        rules.insert(i64::from(NATIVE.syscall_number(name).unwrap()), vec![]);
    }
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Errno(1),
        seccompiler::SeccompAction::Allow,
        std::env::consts::ARCH.try_into()?,
    )?;
    let linear: seccompiler::BpfProgram = filter.try_into()?;
    let linear: Vec<sandbox_policy::Insn> = linear
        .iter()
        .map(|i| sandbox_policy::Insn {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();

    let time_attach = |prog: &[sandbox_policy::Insn]| -> Result<f64> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let mut fds = [0i32; 2];
            // SAFETY: pipe writes two descriptors into the array.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                bail!("pipe failed");
            }
            // SAFETY: the child only calls install (no allocation), write and _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let t = Instant::now();
                let ok = sandbox_policy::install(prog).is_ok();
                let ns: u64 = if ok {
                    t.elapsed().as_nanos() as u64
                } else {
                    u64::MAX
                };
                // SAFETY: writes 8 bytes from a local, then exits without unwinding.
                unsafe {
                    libc::write(fds[1], (&ns as *const u64).cast(), 8);
                    libc::_exit(0);
                }
            }
            let mut ns = 0u64;
            // SAFETY: reads 8 bytes into a local; closes our descriptors; reaps the child.
            unsafe {
                libc::close(fds[1]);
                libc::read(fds[0], (&mut ns as *mut u64).cast(), 8);
                libc::close(fds[0]);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            if ns == u64::MAX {
                bail!("installing the filter failed in the child");
            }
            v.push(ns as f64 / 1000.0);
        }
        Ok(median(&mut v))
    };
    let mut t_ours = Vec::new();
    let mut t_lin = Vec::new();
    for _ in 0..5 {
        t_ours.push(time_attach(&ours)?);
        t_lin.push(time_attach(&linear)?);
    }
    let (a, b) = (median(&mut t_ours), median(&mut t_lin));
    Ok(format!(
        "## Attaching the filter: tree versus linear chain\n\n\
         The kernel emulates the program for every syscall number when it attaches it (to build its \
         decision cache), so the program's shape sets the attach cost. Same 100 names, each `seccomp()` \
         call timed in a fresh child, median of 5 rounds of {n}:\n\n\
         | program | instructions | µs to attach |\n|---|---|---|\n\
         | ours (range tree) | {} | {a:.1} |\n\
         | seccompiler 0.5 (linear chain) | {} | {b:.1} |\n\n\
         Ours attaches in **{:.2}x** the time of the linear chain.\n\n",
        ours.len(),
        linear.len(),
        a / b
    ))
}

/// The deny-and-report section, smaller with `--quick`.
fn violations(quick: bool) -> Result<String> {
    if quick {
        crate::bench_violations::run(3, 5)
    } else {
        crate::bench_violations::run(9, 41)
    }
}

/// Runs every benchmark and writes docs/benchmarks.md.
pub fn run(args: &[&str]) -> Result<()> {
    // `--process-api`: only the process API section, printed and written (not with --quick). Before the release
    // re-run below: it measures two `sandbox` processes (a release build with the feature), not
    // code of this process.
    if args.contains(&"--process-api") {
        let quick = args.contains(&"--quick");
        let section = crate::bench_process_api::run(if quick { 10 } else { 40 })?;
        print!("{section}");
        if !quick {
            let path = crate::workspace::root().join("docs/benchmarks.md");
            let old = std::fs::read_to_string(&path).context("reading docs/benchmarks.md")?;
            crate::workspace::write_doc(
                &path,
                &crate::bench_violations::replace_section(&old, &section),
            )?;
        }
        return Ok(());
    }
    // `--in-container`: per container setting, the agent matrix's share and the one-shot cost
    // inside a runc container, printed, not written. What is timed is the sandbox binary
    // (a separate, optimised build), not this process, so it needs no release re-run.
    if args.contains(&"--in-container") {
        let n = if args.contains(&"--quick") { 20 } else { 100 };
        print!("{}", crate::bench_container::run(n)?);
        return Ok(());
    }
    // Measure optimised code: the host's own work per spawn is part of several figures.
    if cfg!(debug_assertions) {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["run", "--quiet", "--release", "-p", "xtask", "--", "bench"])
            .args(args)
            .current_dir(crate::workspace::root())
            .status()
            .context("re-running the benchmarks in release mode")?;
        if !status.success() {
            bail!("benchmarks failed: {status}");
        }
        return Ok(());
    }
    let quick = args.contains(&"--quick");
    // `--oneshot`: only the one-shot section, printed, not written.
    if args.contains(&"--oneshot") {
        print!(
            "{}",
            crate::bench_oneshot::run(if quick { 100 } else { 500 })?
        );
        return Ok(());
    }
    // `--exec`: only the exec runtime's section, printed, not written (for quick iterations).
    if args.contains(&"--exec") {
        print!(
            "{}",
            crate::bench_exec::run(if quick { 100 } else { 1000 })?
        );
        return Ok(());
    }
    // `--fsize`: only the file-size search section, printed, not written.
    if args.contains(&"--fsize") {
        let (rounds, per) = if quick { (3, 5) } else { (9, 10) };
        print!("{}", crate::bench_fsize::run(rounds, per)?);
        return Ok(());
    }
    // `--leaks`: only the leak-scan section, printed, not written.
    if args.contains(&"--leaks") {
        print!("{}", crate::bench_leaks::run(if quick { 5 } else { 21 })?);
        return Ok(());
    }
    // `--opens`: only the section on the host's opens in a linked workspace, printed.
    if args.contains(&"--opens") {
        let (rounds, per) = if quick { (3, 3) } else { (7, 5) };
        print!("{}", crate::bench_opens::run(rounds, per)?);
        return Ok(());
    }
    // `--landlock`: only the Landlock section, printed, not written.
    if args.contains(&"--landlock") {
        let (rounds, per) = if quick { (9, 10) } else { (15, 40) };
        print!("{}", crate::bench_landlock::run(rounds, per)?);
        return Ok(());
    }
    // `--serve`: only the serve section, printed, not written.
    if args.contains(&"--serve") {
        print!(
            "{}",
            crate::bench_serve::run(if quick { 100 } else { 1000 })?
        );
        return Ok(());
    }
    // `--mcp`: only the MCP section, printed, not written.
    if args.contains(&"--mcp") {
        let (rounds, per) = if quick { (5, 20) } else { (15, 100) };
        print!("{}", crate::bench_mcp::run(rounds, per)?);
        return Ok(());
    }
    // `--session`: only the session section, printed, not written.
    if args.contains(&"--session") {
        let (n, growth) = if quick { (400, 1000) } else { (4000, 10_000) };
        print!("{}", crate::bench_session::run(n, growth)?);
        return Ok(());
    }
    // `--learn`: only the learn section, printed, not written.
    if args.contains(&"--learn") {
        let (rounds, per) = if quick { (3, 5) } else { (7, 20) };
        print!("{}", crate::bench_learn::run(rounds, per)?);
        return Ok(());
    }
    // `--outer`: only the outer-filter section, printed, not written.
    if args.contains(&"--outer") {
        let (rounds, per) = if quick { (3, 50) } else { (7, 300) };
        print!("{}", crate::bench_outer::run(rounds, per)?);
        return Ok(());
    }
    // `--proxy`: only the proxy section, printed, not written.
    if args.contains(&"--proxy") {
        print!(
            "{}",
            crate::bench_proxy::run(if quick { 400 } else { 4000 })?
        );
        return Ok(());
    }
    // `--oci`: only the OCI export/import section, printed, not written.
    if args.contains(&"--oci") {
        print!("{}", crate::bench_oci::run(if quick { 70 } else { 700 })?);
        return Ok(());
    }
    // `--violations`: only the deny-and-report section, printed, and replaced in
    // docs/benchmarks.md (the rest of the file is kept) unless `--quick`.
    if args.contains(&"--violations") {
        let section = violations(quick)?;
        print!("{section}");
        if !quick {
            let path = Path::new("docs/benchmarks.md");
            let old = std::fs::read_to_string(crate::workspace::root().join(path))
                .context("reading docs/benchmarks.md")?;
            crate::workspace::write_doc(
                path,
                &crate::bench_violations::replace_section(&old, &section),
            )?;
        }
        return Ok(());
    }
    let so = xtask::matrix::preload()?;
    let (rounds, per) = if quick { (3, 50) } else { (7, 300) };
    let mut doc = String::from("# Benchmarks\n\nWritten by `cargo xtask bench`; every ratio is against a baseline measured in the same run.\n\n");
    doc += &format!("Machine: {}.\n\n", machine());
    doc += &crate::bench_oneshot::run(if quick { 100 } else { 500 })?;
    doc += &preload_startup(&so, rounds, per)?;
    doc += &attach_cost(if quick { 50 } else { 200 })?;
    doc += &crate::bench_outer::run(rounds, per)?;
    doc += &xtask::bench_syscalls::run()?;
    doc += &crate::bench_exec::run(if quick { 100 } else { 1000 })?;
    doc += &crate::bench_serve::run(if quick { 100 } else { 1000 })?;
    doc += &crate::bench_mcp::run(if quick { 5 } else { 15 }, if quick { 20 } else { 100 })?;
    doc += &crate::bench_fsize::run(if quick { 3 } else { 9 }, if quick { 5 } else { 10 })?;
    doc += &crate::bench_proxy::run(if quick { 400 } else { 4000 })?;
    doc += &crate::bench_leaks::run(if quick { 5 } else { 21 })?;
    doc += &crate::bench_landlock::run(if quick { 9 } else { 15 }, if quick { 10 } else { 40 })?;
    doc += &crate::bench_oci::run(if quick { 70 } else { 700 })?;
    doc += &crate::bench_learn::run(if quick { 3 } else { 7 }, if quick { 5 } else { 20 })?;
    doc += &violations(quick)?;
    doc += &crate::bench_process_api::run(if quick { 10 } else { 40 })?;
    print!("{doc}");
    if !quick {
        crate::workspace::write_doc(Path::new("docs/benchmarks.md"), &doc)?;
    }
    Ok(())
}
