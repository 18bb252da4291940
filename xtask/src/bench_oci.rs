//! OCI export and import of Docker's default profile: the translation alone, in process, with
//! parsing the same JSON with serde_json as the baseline measured in the same rounds.

use crate::bench_exec::median;
use anyhow::Result;
use sandbox_policy::oci::{self, DockerEnv};
use sandbox_policy::profile::Profile;
use sandbox_policy::NATIVE;
use std::fmt::Write;
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// The section for docs/benchmarks.md; `n` operations of each kind in all.
pub fn run(n: usize) -> Result<String> {
    let moby = std::fs::read_to_string(
        crate::workspace::root().join("policy/tests/data/moby/default.json"),
    )?;
    let env = DockerEnv::docker_default(Some((6, 1)));
    let imported = oci::import(&moby, "default.json", NATIVE, &env)?;
    let shell = Profile::builtin("shell")?;
    type Op<'a> = (&'a str, Box<dyn Fn() -> Result<()> + 'a>);
    let ops: Vec<Op> = vec![
        (
            "parse the JSON only (serde_json; baseline)",
            Box::new(|| {
                let v: serde_json::Value = serde_json::from_str(&moby)?;
                std::hint::black_box(v);
                Ok(())
            }),
        ),
        (
            "import Docker's default profile",
            Box::new(|| {
                std::hint::black_box(oci::import(&moby, "default.json", NATIVE, &env)?);
                Ok(())
            }),
        ),
        (
            "export it again",
            Box::new(|| {
                std::hint::black_box(oci::export(&imported.profile, NATIVE, None)?);
                Ok(())
            }),
        ),
        (
            "export the built-in shell profile",
            Box::new(|| {
                std::hint::black_box(oci::export(&shell, NATIVE, None)?);
                Ok(())
            }),
        ),
    ];
    for (_, op) in &ops {
        op()?;
    }
    let per_round = (n / ROUNDS).max(1);
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    for _ in 0..ROUNDS {
        for (i, (_, op)) in ops.iter().enumerate() {
            let c0 = cpu_time();
            for _ in 0..per_round {
                let t = Instant::now();
                op()?;
                wall[i].push(t.elapsed().as_secs_f64() * 1e3);
            }
            cpu[i].push((cpu_time() - c0).as_secs_f64() * 1e3 / per_round as f64);
        }
    }
    let mut s = String::from("## OCI export and import of Docker's default profile\n\n");
    let _ = write!(
        s,
        "{} operations of each kind, {ROUNDS} interleaved rounds of {per_round}, in process \
         (`sandbox_policy::oci`; the command adds its start-up and one file read or write). \
         Docker's default profile is {} bytes. Median wall time per operation, and median over \
         rounds of CPU time per operation; the ratio is against parsing the same JSON.\n\n\
         | operation | wall ms | CPU ms | CPU / parse |\n|---|---:|---:|---:|\n",
        per_round * ROUNDS,
        moby.len()
    );
    let base = median(&cpu[0]).max(1e-9);
    for (i, (name, _)) in ops.iter().enumerate() {
        let c = median(&cpu[i]);
        let _ = writeln!(
            s,
            "| {name} | {:.3} | {:.3} | {:.1}x |",
            median(&wall[i]),
            c,
            c / base
        );
    }
    s += "\nThe bound the figures are held to: under 50 ms each for import and export.\n\n";
    Ok(s)
}
