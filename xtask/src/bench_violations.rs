//! The deny-and-report section of `cargo xtask bench`: what reporting refused calls costs.
//!
//! Two bars, each against a baseline measured in the same run, in interleaved rounds:
//!
//! - allowed calls: 1M `getppid` under `sandbox run --profile shell` (deny and report, the
//!   default) and under `--on-violation kill`, against the same loop under a one-instruction
//!   `SECCOMP_RET_ALLOW` filter: reporting must not slow down calls the profile allows;
//! - refused calls: a program making 10,000 refused calls (`socket`, EPERM under `shell`)
//!   against one making 10,000 allowed ones (`getppid`), whole `sandbox run` wall and CPU time:
//!   each refused call is a round trip to the host's supervisor, the target is under 10x.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The loop program: `getppid N ROUNDS [one-insn]` prints the median ns per call of ROUNDS
/// rounds of N calls; `allowed N` makes N `getppid` calls; `denied N` makes N `socket` calls
/// and fails unless every one was refused with EPERM.
const LOOP_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int one_instruction(void) {
    struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog p = {1, f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return -1;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    long n = atol(argv[2]);
    if (n < 1) return 2;
    if (!strcmp(argv[1], "getppid")) {
        int rounds = argc > 3 ? atoi(argv[3]) : 5;
        if (rounds < 1 || rounds > 101) return 2;
        if (argc > 4 && !strcmp(argv[4], "one-insn") && one_instruction()) {
            perror("one-instruction filter");
            return 3;
        }
        double v[101];
        for (long i = 0; i < n / 10; i++) syscall(SYS_getppid);
        for (int r = 0; r < rounds; r++) {
            double t0 = now();
            for (long i = 0; i < n; i++) syscall(SYS_getppid);
            v[r] = (now() - t0) / n;
        }
        qsort(v, rounds, sizeof v[0], cmp);
        printf("%.3f\n", v[rounds / 2]);
        return 0;
    }
    if (!strcmp(argv[1], "allowed")) {
        for (long i = 0; i < n; i++) syscall(SYS_getppid);
        return 0;
    }
    if (!strcmp(argv[1], "denied")) {
        long wrong = 0;
        for (long i = 0; i < n; i++)
            if (syscall(SYS_socket, AF_INET, SOCK_STREAM, 0) != -1 || errno != EPERM) wrong++;
        if (wrong) {
            fprintf(stderr, "%ld of %ld socket calls were not refused with EPERM\n", wrong, n);
            return 3;
        }
        return 0;
    }
    return 2;
}
"#;

/// Refused (and allowed) calls per program in the second bar.
const CALLS: u64 = 10_000;
/// Calls per round in the first bar.
const GETPPID: u64 = 1_000_000;

/// Compiles the loop program under the target directory (the sandbox's private /tmp would
/// hide a program built in the host's).
fn compile() -> Result<PathBuf> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace::root().join("target"))
        .join(format!("bench-violations-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("loop.c");
    std::fs::write(&src, format!("{}{LOOP_C}", xtask::bench_syscalls::TIMING_C))?;
    let bin = dir.join("loop");
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

/// The bare environment agents run commands in.
fn agent_env() -> Vec<(String, String)> {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), home),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// Nanoseconds per `getppid` printed by one run of `argv`.
fn ns_per_call(argv: &[String]) -> Result<f64> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(agent_env())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {}", argv[0]))?;
    if !out.status.success() {
        bail!(
            "{argv:?}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .with_context(|| format!("{argv:?} printed {:?}", out.stdout))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The section, with `repeats` processes per variant in the first bar and `n` runs per
/// variant in the second.
pub fn run(repeats: usize, n: usize) -> Result<String> {
    let sandbox = crate::bench_serve::sandbox_binary()?;
    let bin = compile()?;
    let result = section(&sandbox, &bin, repeats, n);
    let _ = std::fs::remove_dir_all(bin.parent().expect("the program has a directory"));
    result
}

fn section(sandbox: &Path, bin: &Path, repeats: usize, n: usize) -> Result<String> {
    let s = sandbox.display().to_string();
    let b = bin.display().to_string();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let run = |extra: &[&str], args: &[String]| {
        let mut v = vec![s.clone(), "run".to_string()];
        if root {
            v.push("--allow-root".into());
        }
        v.extend(["--profile", "shell"].iter().map(|e| e.to_string()));
        v.extend(extra.iter().map(|e| e.to_string()));
        v.extend(["--".to_string(), b.clone()]);
        v.extend(args.iter().cloned());
        v
    };

    // Allowed calls: ns per getppid, three variants, processes taking turns.
    let rounds = 5;
    let g = |extra: &[&str]| {
        vec!["getppid".into(), GETPPID.to_string(), rounds.to_string()]
            .into_iter()
            .chain(extra.iter().map(|e| e.to_string()))
            .collect::<Vec<String>>()
    };
    let mut one = vec![b.clone()];
    one.extend(g(&["one-insn"]));
    let allowed_variants = [
        ("one-instruction filter (`SECCOMP_RET_ALLOW`)", one),
        ("`run --profile shell` (deny and report)", run(&[], &g(&[]))),
        (
            "`run --profile shell --on-violation kill`",
            run(&["--on-violation", "kill"], &g(&[])),
        ),
    ];
    let mut ns = vec![Vec::with_capacity(repeats); allowed_variants.len()];
    for (_, argv) in &allowed_variants {
        ns_per_call(argv).context("warm-up run")?;
    }
    for _ in 0..repeats {
        for (i, (_, argv)) in allowed_variants.iter().enumerate() {
            ns[i].push(ns_per_call(argv)?);
        }
    }
    let ns: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();

    // Refused calls: whole-program CPU and wall time.
    let calls = CALLS.to_string();
    let program_variants = [
        (
            format!("{CALLS} allowed calls (`getppid`)"),
            run(&[], &["allowed".into(), calls.clone()]),
        ),
        (
            format!("{CALLS} refused calls (`socket`, EPERM)"),
            run(&[], &["denied".into(), calls.clone()]),
        ),
    ];
    let envp: Vec<CString> = agent_env()
        .into_iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).expect("no NUL"))
        .collect();
    let argvs: Vec<Vec<CString>> = program_variants
        .iter()
        .map(|(_, v)| {
            v.iter()
                .map(|a| CString::new(std::ffi::OsStr::new(a).as_bytes()).expect("no NUL"))
                .collect()
        })
        .collect();
    for a in &argvs {
        crate::bench_oneshot::once(a, &envp).context("warm-up run")?;
    }
    let mut cpu = vec![Vec::with_capacity(n); argvs.len()];
    let mut wall = vec![Vec::with_capacity(n); argvs.len()];
    for _ in 0..n {
        for (i, a) in argvs.iter().enumerate() {
            let (c, w) = crate::bench_oneshot::once(a, &envp)?;
            cpu[i].push(c);
            wall[i].push(w);
        }
    }
    let cpu: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    let wall: Vec<f64> = wall.iter_mut().map(|v| median(v)).collect();

    let mut md = String::from("## Deny and report: allowed calls and refused calls\n\n");
    md += &format!(
        "Allowed calls: nanoseconds per `getppid` inside the program (median of {repeats} \
         processes, each the median of {rounds} rounds of {GETPPID} calls), the variants taking \
         turns process by process; the one-instruction filter runs the same loop outside the \
         sandbox. Only refused calls reach the host, so deny and report should cost what kill \
         costs.\n\n"
    );
    md += "| variant | ns per call | vs one-instruction filter |\n|---|---:|---:|\n";
    for (i, (label, _)) in allowed_variants.iter().enumerate() {
        md += &format!("| {label} | {:.1} | {:.2}x |\n", ns[i], ns[i] / ns[0]);
    }
    md += &format!(
        "\nDeny and report against kill: **{:.2}x** per allowed call.\n\n",
        ns[1] / ns[2]
    );
    md += &format!(
        "Refused calls: one whole `sandbox run --profile shell` of a program making {CALLS} calls \
         (CPU time of the host and everything it waited for, from `wait4`; wall time), median of \
         {n} runs of each, the two taking turns run by run; bare environment (PATH, HOME, LANG), \
         stdio on /dev/null{}. Each refused call waits in the kernel until the host's supervisor \
         has counted it and answered.\n\n",
        if root {
            ", `--allow-root` because the bench runs as root"
        } else {
            ""
        }
    );
    md += "| program | CPU ms | wall ms | CPU vs allowed | wall vs allowed |\n\
           |---|---:|---:|---:|---:|\n";
    for (i, (label, _)) in program_variants.iter().enumerate() {
        md += &format!(
            "| {label} | {:.2} | {:.2} | {:.2}x | {:.2}x |\n",
            cpu[i],
            wall[i],
            cpu[i] / cpu[0],
            wall[i] / wall[0]
        );
    }
    md += &format!(
        "\nA program making {CALLS} refused calls takes **{:.2}x** the wall time of one making \
         {CALLS} allowed calls (target under 10x), {:.2}x the CPU time; each refused call adds \
         about {:.1} µs of wall time and {:.1} µs of CPU time. Noisy machine (other builds \
         running): expect 10-20% between runs.\n\n",
        wall[1] / wall[0],
        cpu[1] / cpu[0],
        (wall[1] - wall[0]) * 1e3 / CALLS as f64,
        (cpu[1] - cpu[0]) * 1e3 / CALLS as f64,
    );
    Ok(md)
}

/// Replaces this section in `doc` (up to the next `## ` heading), or appends it.
pub fn replace_section(doc: &str, section: &str) -> String {
    let heading = section.lines().next().unwrap_or_default();
    match doc.find(&format!("\n{heading}\n")) {
        Some(start) => {
            let start = start + 1;
            let end = doc[start + heading.len()..]
                .find("\n## ")
                .map_or(doc.len(), |e| start + heading.len() + e + 1);
            format!("{}{}{}", &doc[..start], section, &doc[end..])
        }
        None => {
            let mut out = doc.trim_end().to_string();
            out.push_str("\n\n");
            out.push_str(section);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::replace_section;

    #[test]
    fn a_section_is_replaced_in_place_or_appended() {
        let doc = "# B\n\n## A\n\nold a\n\n## X\n\nold\n\n## C\n\nc\n";
        let new = "## X\n\nnew\n\n";
        assert_eq!(
            replace_section(doc, new),
            "# B\n\n## A\n\nold a\n\n## X\n\nnew\n\n## C\n\nc\n"
        );
        let last = "# B\n\n## X\n\nold\n";
        assert_eq!(replace_section(last, new), "# B\n\n## X\n\nnew\n\n");
        assert_eq!(
            replace_section("# B\n\n## A\n\na\n", new),
            "# B\n\n## A\n\na\n\n## X\n\nnew\n\n"
        );
    }
}
