//! The one-shot section of `cargo xtask bench`: what one `sandbox run` of `/bin/true` costs
//! in CPU time against `/bin/true` alone, as an agent pays it on every command.
//!
//! CPU time is user + system time of the process and every descendant it waited for
//! (`wait4`'s rusage), so the sandbox's own work, its threads, the child's setup and the
//! program are all counted. The variants take turns spawn by spawn, so drift and other load
//! hit all of them alike; the figures are medians.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Where the time of a one-shot run goes, from `perf record -e task-clock` over 200 runs of
/// `run --profile minimal` (release build) and `strace -f -c` (kept with the figures, because
/// the ratios are far from their targets).
const WHERE: &str = "Where the time goes (`perf record -e task-clock` over 200 runs of `run \
--profile minimal`, `strace -f -c`, and the differences between the rows above; µs per run, \
approximate on this loaded machine): **the program itself** ~620 (the `/bin/true` row; paid \
inside the sandbox too); **start-up of the `sandbox` binary** ~590 (exec and page faults of a \
4.3 MB binary, the dynamic loader, std's start-up, argument parsing); **the engine alone** \
~1700 (the request cgroup made and removed in the v2 hierarchy and a v1 `pids` cgroup for the \
process limit: `mkdir`/`rmdir` in cgroupfs ~240 of kernel time, reading `/proc/self/cgroup` \
and `/proc/self/mountinfo` and listing stale cgroups to find them; resolving the program; the \
child's `clone3` into the cgroup, its setup (68 `rt_sigaction`, the capability bounding set) \
and exec; waiting and the result); **namespaces** ~780 in all (the `unrestricted \
--landlock off` row against the engine alone): the network namespace ~370 (the kernel \
registering loopback, its per-namespace sysctl tables and IPv6 address configuration: \
`copy_net_ns`), bringing loopback up ~50, the user, PID, mount, IPC and UTS namespaces ~70, \
mounting `/proc` and a `/tmp` tmpfs ~50, dropping capabilities ~30, and the init for the \
rest (a root host now clones it sharing its memory; other users still copy the host's page \
tables and take the copy-on-write faults); **the profile's filter** ~1700 (`minimal --landlock \
off` against `unrestricted --landlock off`: building the profile's policy and compiling it, \
the spawner thread that holds the filter and its 2 MB stack, attaching the filter with a \
listener ~80 of kernel time, the notification thread, and the filter running on every call \
of the init and the program); **Landlock** ~450 under `minimal` (the carve-out in the host: \
reading `/` and `$HOME`, ~45 `O_PATH` opens and ~20 `statx`; the init creating the ruleset \
and adding ~46 rules ~35; more under `shell`, whose workspace and private temporary \
directory add rules). For comparison, `bwrap` does the same namespace work (and more: a \
new root, `/dev`) with no filter, no Landlock and no cgroups, and its CPU time is only seen \
when every task is counted (its outer process never reaps the namespace's init: `wait4` \
reported 2.0-2.8 ms against 6.3-6.5 ms counted). The C floor rows bound any launcher: the \
namespace work alone, in a launcher with nothing else, costs 0.45-0.52x bubblewrap with the \
network namespace, `/bin/true` included: the 0.5x target \
leaves nothing for a filter, Landlock, cgroups or a Rust binary's start-up, so it is out of \
reach on this kernel for one-shot runs. Removed so far: the v1 `memory` hierarchy's lookup at exit (a request cgroup made and \
removed for nothing), the second mountinfo read and the stale-cgroup listings on most runs, \
the request's cgroup v2 in namespaced runs (its PID namespace's init ends \
the tree: one `mkdir`, `rmdir` and the cgroup's probe fewer), the two namespace probes (each run forked the host twice and created a \
second set of namespaces, network included: namespaces are now presumed to work until the \
spawn's `clone3` is refused, and only then probed), the host's kernel Landlock ruleset in \
namespaced runs (the init builds its own; ~45 `landlock_add_rule` saved), the leak scanner's \
automaton on runs that collect no output, fat LTO in one codegen unit (the binary 5.7 to 4.3 \
MB, start-up ~0.2 ms less); earlier: the tracing subscriber, extracting and hashing the \
preload on runs that never load it, compiling the outer filter twice, validating built-in \
profiles by compiling them, the cgroup probe, parsing `/proc/self/mountinfo` for the cgroup \
v2 mount, and the private TMPDIR under profiles that refuse file creation.\n\n";

/// bubblewrap's arguments for the comparison: every namespace, as `sandbox run` isolates.
const BWRAP_ARGS: &[&str] = &[
    "--unshare-all",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
];

/// One variant: a label and its argv.
#[derive(Clone)]
struct Variant {
    label: String,
    argv: Vec<String>,
}

/// CPU (user + system, ms) and wall (ms) of one run of `argv`, stdio on /dev/null, in a bare
/// environment (PATH, HOME, LANG) as agents run commands.
pub(crate) fn once(argv: &[CString], envp: &[CString]) -> Result<(f64, f64)> {
    let m = measure(argv, envp, false)?;
    Ok((m.rusage, m.wall))
}

/// One run's figures, in ms.
struct Measured {
    /// User + system time of the process and the descendants it (or they) waited for.
    rusage: f64,
    /// `task-clock` of every task the run started, waited for or not (when asked and the
    /// kernel lets us count).
    tree: Option<f64>,
    wall: f64,
}

/// A `task-clock` counter on this thread (`inherit`: also on every task it starts from now
/// on, and theirs), or `None` when the kernel refuses one (`perf_event_paranoid`).
fn task_clock(inherit: bool) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // struct perf_event_attr up to PERF_ATTR_SIZE_VER0 (64 bytes): type PERF_TYPE_SOFTWARE
    // (1) and size, config PERF_COUNT_SW_TASK_CLOCK (1), then the flag bits: enabled, bit 1
    // inherit.
    let mut attr = [0u64; 8];
    attr[0] = 1 | (64 << 32);
    attr[1] = 1;
    attr[5] = if inherit { 1 << 1 } else { 0 };
    // SAFETY: perf_event_open reads 64 bytes of attr; it returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            0,
            -1,
            -1,
            8usize, // PERF_FLAG_FD_CLOEXEC
        )
    };
    // SAFETY: a descriptor just created for us.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// The counter's value in ms (its inherited tasks' counts included).
fn read_ms(fd: &std::os::fd::OwnedFd) -> Option<f64> {
    use std::io::Read;
    let mut buf = [0u8; 8];
    std::fs::File::from(fd.try_clone().ok()?)
        .read_exact(&mut buf)
        .ok()?;
    Some(u64::from_ne_bytes(buf) as f64 / 1e6)
}

/// Runs `argv` once: see [`Measured`]. With `tree`, a `task-clock` counter inherited by
/// everything the run starts counts the CPU of tasks nobody waits for: bubblewrap's outer
/// process learns the exit code through an eventfd and exits without reaping the namespace's
/// PID 1, so `wait4` never sees the work of that init and of the program it ran.
fn measure(argv: &[CString], envp: &[CString], tree: bool) -> Result<Measured> {
    let mut args: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    args.push(std::ptr::null());
    let mut env: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    env.push(std::ptr::null());
    let null = c"/dev/null";
    // This thread's own share (posix_spawn's parent side, wait4) is taken out of the tree's.
    let counters = if tree {
        task_clock(false).zip(task_clock(true))
    } else {
        None
    };
    // SAFETY: posix_spawn file actions are initialised, used and destroyed here; every
    // pointer passed lives until posix_spawn returns; wait4 writes into locals.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        for fd in 0..3 {
            libc::posix_spawn_file_actions_addopen(&mut fa, fd, null.as_ptr(), libc::O_RDWR, 0);
        }
        let mut pid = 0;
        let t = std::time::Instant::now();
        let rc = libc::posix_spawn(
            &mut pid,
            args[0],
            &fa,
            std::ptr::null(),
            args.as_ptr() as *const *mut libc::c_char,
            env.as_ptr() as *const *mut libc::c_char,
        );
        libc::posix_spawn_file_actions_destroy(&mut fa);
        if rc != 0 {
            bail!(
                "spawning {:?}: {}",
                argv[0],
                std::io::Error::from_raw_os_error(rc)
            );
        }
        let mut status = 0;
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::wait4(pid, &mut status, 0, &mut ru) != pid {
            bail!("wait4: {}", std::io::Error::last_os_error());
        }
        let wall = t.elapsed().as_secs_f64() * 1e3;
        let tree = counters
            .as_ref()
            .and_then(|(own, all)| Some(read_ms(all)? - read_ms(own)?));
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            bail!("{argv:?} failed: wait status {status:#x}");
        }
        let ms = |tv: libc::timeval| tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
        Ok(Measured {
            rusage: ms(ru.ru_utime) + ms(ru.ru_stime),
            tree,
            wall,
        })
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The section, with `n` runs of each variant.
pub fn run(n: usize) -> Result<String> {
    let sandbox = crate::bench_serve::sandbox_binary()?;
    // Under the target directory, like the other C helpers of the benchmarks.
    let dir = crate::bench_floor::helper_dir("oneshot");
    let floor = crate::bench_floor::compile(&dir)?;
    let md = section(&sandbox, &floor, &dir, n);
    let _ = std::fs::remove_dir_all(&dir);
    md
}

fn section(sandbox: &Path, floor: &Path, dir: &Path, n: usize) -> Result<String> {
    let s = sandbox.display().to_string();
    // Quiet as an unprivileged user would be: root gets a warning line per run otherwise.
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let run = |extra: &[&str]| {
        let mut v = vec![s.clone(), "run".to_string()];
        if root {
            v.push("--allow-root".into());
        }
        v.extend(extra.iter().map(|e| e.to_string()));
        v.extend(["--".to_string(), "/bin/true".to_string()]);
        v
    };
    // The engine alone: every layer off, the host's network.
    let engine = |profile: &str| {
        run(&[
            "--profile",
            profile,
            "--landlock",
            "off",
            "--isolation",
            "off",
            "--network",
            "host",
        ])
    };
    let variants = [
        Variant {
            label: "`/bin/true`".into(),
            argv: vec!["/bin/true".into()],
        },
        Variant {
            label: "`sandbox --version` (start-up alone)".into(),
            argv: vec![s.clone(), "--version".into()],
        },
        Variant {
            label: "`run --profile unrestricted --landlock off --isolation off --network host` (the engine alone)".into(),
            argv: engine("unrestricted"),
        },
        Variant {
            label: "`run --profile unrestricted --landlock off`".into(),
            argv: run(&["--profile", "unrestricted", "--landlock", "off"]),
        },
        Variant {
            label: "`run --profile minimal --landlock off`".into(),
            argv: run(&["--profile", "minimal", "--landlock", "off"]),
        },
        Variant {
            label: "`run --profile minimal` (Landlock on: the default)".into(),
            argv: run(&["--profile", "minimal"]),
        },
        Variant {
            label: "`run --profile minimal --isolation off` (no namespaces: the host's network)"
                .into(),
            argv: run(&["--profile", "minimal", "--isolation", "off"]),
        },
        Variant {
            label: "`run --profile minimal --network none` (namespaces + Landlock)".into(),
            argv: run(&["--profile", "minimal", "--network", "none"]),
        },
        Variant {
            label: "`run --profile shell --landlock off`".into(),
            argv: run(&["--profile", "shell", "--landlock", "off"]),
        },
        Variant {
            label: "`run --profile shell`".into(),
            argv: run(&["--profile", "shell"]),
        },
        Variant {
            label: "`run --profile minimal --landlock off --isolation off --network host` (the \
                    engine alone, with the filter)"
                .into(),
            argv: engine("minimal"),
        },
    ];
    let mut variants = Vec::from(variants);
    // The floor rows: the kernel work of our namespace set and nothing else (FLOOR_C).
    let f = floor.display().to_string();
    let floor_net = variants.len();
    for (arg, label) in [
        ("net", "C floor: user, PID, mount, IPC, UTS and network namespaces, loopback up, `/proc`, `/tmp`, init + `vfork`"),
        ("nonet", "C floor without the network namespace"),
    ] {
        variants.push(Variant {
            label: label.into(),
            argv: vec![f.clone(), arg.into(), "/bin/true".into()],
        });
    }
    // The engine's floor: its kernel work in C (FLOOR_C's `engine` mode), step by step.
    let engine_floor = variants.len();
    let (v2, pids) = crate::bench_floor::engine_cgroups();
    let filter = crate::bench_floor::engine_filter(dir, true)?
        .display()
        .to_string();
    for (label, args) in [
        (
            "C floor of the engine: a launcher that clones, execs and waits, nothing else",
            ["-", "-", "-"],
        ),
        (
            "C floor of the engine: + a v2 and a v1 `pids` request cgroup, a session, the four \
             resource limits",
            [&v2, &pids, "-"],
        ),
        (
            "C floor of the engine: + the `minimal` filter with a listener (the kernel work of \
             the row above it)",
            [&v2, &pids, &filter],
        ),
    ] {
        let mut argv = vec![f.clone(), "engine".into()];
        argv.extend(args.iter().map(|a| a.to_string()));
        argv.push("/bin/true".into());
        variants.push(Variant {
            label: label.into(),
            argv,
        });
    }
    // bubblewrap with every namespace, as peers isolate a command (when it is installed).
    let bwrap = ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if let Some(b) = bwrap {
        variants.push(Variant {
            label: format!("`bwrap {}`", BWRAP_ARGS.join(" ")),
            argv: std::iter::once(b.to_string())
                .chain(BWRAP_ARGS.iter().map(|a| a.to_string()))
                .chain(["/bin/true".to_string()])
                .collect(),
        });
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let envp: Vec<CString> = [
        "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
        format!("HOME={home}"),
        "LANG=C.UTF-8".to_string(),
    ]
    .into_iter()
    .map(|e| CString::new(e).expect("no NUL"))
    .collect();
    let argvs: Vec<Vec<CString>> = variants
        .iter()
        .map(|v| {
            v.argv
                .iter()
                .map(|a| CString::new(std::ffi::OsStr::new(a).as_bytes()).expect("no NUL"))
                .collect()
        })
        .collect();
    // Warm-up: the preload extraction, page cache, cgroup directories.
    let mut counted = true;
    for a in &argvs {
        counted &= measure(a, &envp, true)
            .context("warm-up run")?
            .tree
            .is_some();
    }
    let mut cpu = vec![Vec::with_capacity(n); variants.len()];
    let mut waited = vec![Vec::with_capacity(n); variants.len()];
    let mut wall = vec![Vec::with_capacity(n); variants.len()];
    for _ in 0..n {
        for (i, a) in argvs.iter().enumerate() {
            let m = measure(a, &envp, counted)?;
            cpu[i].push(m.tree.unwrap_or(m.rusage));
            waited[i].push(m.rusage);
            wall[i].push(m.wall);
        }
    }
    let cpu: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    let waited: Vec<f64> = waited.iter_mut().map(|v| median(v)).collect();
    let wall: Vec<f64> = wall.iter_mut().map(|v| median(v)).collect();
    let mut md = String::from("## One-shot: `sandbox run -- /bin/true` against `/bin/true`\n\n");
    md += &format!(
        "CPU time {} and wall time, median of {n} runs of each variant, the variants taking \
         turns run by run; bare environment (PATH, HOME, LANG), stdio on /dev/null{}. The \
         `wait4` column is the user + system time `wait4` reports (the process and the \
         descendants that were waited for): it misses whatever is never reaped, as \
         bubblewrap's namespace init and the program it ran.\n\n",
        if counted {
            "(`task-clock` of every task the run started, waited for or not: a software \
             counter inherited by the run's whole tree)"
        } else {
            "(the kernel refused a `task-clock` counter here: user + system from `wait4`, \
             which misses unreaped tasks)"
        },
        if root {
            ", `--allow-root` because the bench runs as root"
        } else {
            ""
        }
    );
    md += "| variant | CPU ms | CPU vs `/bin/true` | `wait4` CPU ms | wall ms |\n\
           |---|---:|---:|---:|---:|\n";
    for (i, v) in variants.iter().enumerate() {
        md += &format!(
            "| {} | {:.3} | {:.2}x | {:.3} | {:.3} |\n",
            v.label,
            cpu[i],
            cpu[i] / cpu[0],
            waited[i],
            wall[i]
        );
    }
    // Indices: 0 bare, 1 start-up, 2 engine alone, 5 minimal, 6 isolation off, 7 network
    // none, 8 shell off, 9 shell.
    md += &format!(
        "\n`run --profile minimal` costs **{:.2}x** the CPU time of `/bin/true` (target at most \
         2.5x); the Landlock layer adds **{:+.0}%** to `run --profile shell` ({:.3} ms against \
         {:.3} ms with `--landlock off`, run in this repository; the Landlock section below, \
         rounds of its own in a fresh workspace, is the measure of the layer's 5% target) and \
         {:+.0}% to `run --profile minimal`.\n\n",
        cpu[5] / cpu[0],
        (cpu[9] / cpu[8] - 1.0) * 100.0,
        cpu[9],
        cpu[8],
        (cpu[5] / cpu[4] - 1.0) * 100.0,
    );
    md += &format!(
        "Start-up alone is {:.3} ms {} `/bin/true`; the engine alone (no filter, no \
         Landlock, no namespaces) {:.3} ms above start-up. The namespaces (user, PID, mount, \
         IPC, UTS and network; fresh `/proc`, private `/tmp`, loopback up, the init) add \
         {:+.3} ms to `run --profile minimal` ({:.3} ms against {:.3} ms with `--isolation \
         off`, which has none: without the isolation layer a profile that refuses sockets \
         keeps the host's network).",
        (cpu[1] - cpu[0]).abs(),
        if cpu[1] >= cpu[0] { "above" } else { "below" },
        cpu[2] - cpu[1],
        cpu[5] - cpu[6],
        cpu[5],
        cpu[6]
    );
    if bwrap.is_some() {
        let b = cpu[variants.len() - 1];
        md += &format!(
            " Against bubblewrap with every namespace ({b:.3} ms), `run --profile minimal \
             --network none` costs **{:.2}x** (target at most 0.5x).",
            cpu[7] / b
        );
        md += &format!(
            " The C floor (the same namespaces, loopback, mounts and init, nothing else) costs \
             {:.3} ms, **{:.2}x** bubblewrap; without the network namespace {:.3} ms, \
             **{:.2}x**: the floor under any launcher on this kernel, filter, Landlock and \
             cgroups aside.",
            cpu[floor_net],
            cpu[floor_net] / b,
            cpu[floor_net + 1],
            cpu[floor_net + 1] / b
        );
    } else {
        md += " bubblewrap is not installed: no comparison with it.";
    }
    md += &format!(
        " The engine's own floor (C, `floor engine`: the same cgroups, session, limits and \
         filter with a listener as the engine with `minimal` and no layers, nothing else) \
         costs {:.3} ms, **{:.2}x** `/bin/true` (the engine with that filter: {:.3} ms, \
         {:.2}x); a launcher that only clones, execs and waits costs {:.3} ms, **{:.2}x**: \
         the rest of the engine's cost above its floor is the `sandbox` process's own work.",
        cpu[engine_floor + 2],
        cpu[engine_floor + 2] / cpu[0],
        cpu[10],
        cpu[10] / cpu[0],
        cpu[engine_floor],
        cpu[engine_floor] / cpu[0],
    );
    md += "\n\n";
    md += WHERE;
    Ok(md)
}
