//! `cargo xtask`: the project's build, check and measurement tasks.
//!
//! - `codegen [--check]`: write (or check) the syscall tables in `policy/src/syscalls/`
//! - `build-preload`: build the shipped `libsandbox.so` at `target/preload-build/preload/libsandbox.so`,
//!   the very build host/build.rs embeds
//! - `ci`: the Debian packages the tests need (`.ci/packages`: installed as root, else named),
//!   formatting, the minimum supported Rust version (declared, and the workspace built
//!   with it), clippy, the whole test suite (the table drift check is a test in it), the
//!   workspace checked for aarch64, and the escape suite against the shipped static binary
//! - `msrv`: the minimum-supported-Rust-version check alone (see msrv.rs)
//! - `cross`: the aarch64 check and the build with the minimum supported Rust alone
//! - `matrix [--check]`: run real commands under every built-in profile, write `docs/profiles.md`
//! - `bench [--quick] [--oneshot] [--outer] [--exec] [--fsize] [--serve] [--mcp] [--session] [--proxy]
//!   [--leaks] [--learn] [--violations]`: every benchmark, written to `docs/benchmarks.md` (`--oneshot`,
//!   `--outer`, `--exec`, `--serve`, `--mcp`, `--session`, `--proxy`, `--leaks`, `--learn`: that section
//!   only, printed; `--violations`: the deny-and-report section, printed and replaced in
//!   `docs/benchmarks.md` unless `--quick`; `--in-container`: per container setting, the agent matrix
//!   and the one-shot cost inside runc, printed; `--process-api`: gRPC `Execute` against
//!   `exec --json` from a release build with the `process-api` feature, printed and replaced in
//!   `docs/benchmarks.md` unless `--quick`)

mod acceptance;
mod bench;
mod bench_container;
mod bench_exec;
mod bench_floor;
mod bench_fsize;
mod bench_landlock;
mod bench_leaks;
mod bench_learn;
mod bench_mcp;
mod bench_oci;
mod bench_oneshot;
mod bench_opens;
mod bench_outer;
mod bench_process_api;
mod bench_proxy;
mod bench_serve;
mod bench_session;
mod bench_violations;
mod msrv;
mod workspace;
// Shared with host/build.rs, which alone needs `target_root_of` and `preload_target`.
#[allow(dead_code)]
#[path = "../../host/preload_build.rs"]
mod preload_build;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use workspace::root;

/// Runs a command in the workspace root, failing on a non-zero status.
fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("starting {shown}"))?;
    if !status.success() {
        bail!("{shown} failed: {status}");
    }
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Builds the shipped preload and returns its path: the same build, into the same directory,
/// as the one host/build.rs embeds.
pub fn build_preload() -> Result<PathBuf> {
    let target_root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let dir = preload_build::target_dir(&target_root);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(&mut preload_build::command(&cargo, &root(), &dir, None))?;
    let so = preload_build::library(&dir, None);
    if !so.is_file() {
        bail!("{} was not produced", so.display());
    }
    Ok(so)
}

/// Runs one step of `ci`, saying on stderr when it starts and how long it took (a step can
/// take many minutes on a small machine, and a silent run looks hung).
fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    eprintln!("xtask ci: {name} ...");
    let t = std::time::Instant::now();
    let r = f();
    let took = t.elapsed().as_secs_f64();
    match &r {
        Ok(()) => eprintln!("xtask ci: {name}: done in {took:.0} s"),
        Err(_) => eprintln!("xtask ci: {name}: FAILED after {took:.0} s"),
    }
    r
}

fn ci() -> Result<()> {
    let started = std::time::Instant::now();
    // First, so that a missing `go` or `tsc` stops the run at once, named (see packages.rs).
    step("Debian packages", || {
        let packages = xtask::packages::list(&root())?;
        xtask::packages::ensure(&packages, xtask::packages::Missing::InstallAsRoot)
    })?;
    step("cargo fmt --check", || {
        run(cargo().args(["fmt", "--all", "--", "--check"]))
    })?;
    step("MSRV", || msrv::check(&root()))?;
    // `incompatible_msrv` is named although `-D warnings` covers it: it is the MSRV check for
    // std APIs (see msrv.rs) and must stay an error even if someone allows warnings locally.
    let clippy = |what: &[&str]| {
        run(cargo().arg("clippy").args(what).args([
            "--quiet",
            "--",
            "-D",
            "warnings",
            "-D",
            "clippy::incompatible_msrv",
        ]))
    };
    step("clippy", || clippy(&["--workspace", "--all-targets"]))?;
    // The process API is code only its feature compiles (tonic, tokio): lint that build too.
    step("clippy (process API)", || {
        clippy(&[
            "-p",
            "sandbox-host",
            "--all-targets",
            "--features",
            "process-api",
        ])
    })?;
    // The shipped, no_std build of the preload is a different configuration: lint it too.
    step("clippy (preload)", || {
        clippy(&["-p", "sandbox-preload", "--profile", "preload"])
    })?;
    // `--no-fail-fast`: one failing test binary must not hide the results of the others.
    step("cargo test --workspace", || {
        run(cargo().args(["test", "--workspace", "--all-features", "--no-fail-fast"]))
    })?;
    step("cross checks", cross_checks)?;
    // The escape suite again, against the binary the release bundle ships (fully static where
    // the musl target is installed): a layer that a build configuration loses fails here.
    step("escape suite on the shipped binary", || {
        let shipped = xtask::dist::build_shipped(&root(), "release")?;
        run(cargo()
            .args(["test", "-p", "sandbox-host", "--test", "escape"])
            .env("SANDBOX_TEST_BINARY", &shipped.path))
    })?;
    // Real projects' test suites inside and outside (skipped, said, when registries are down).
    step("acceptance (real projects)", || {
        acceptance::run(&root(), None)
    })?;
    eprintln!(
        "xtask ci: all steps passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The workspace checked for aarch64 and the shipped crates with the minimum supported Rust, each
/// where its toolchain part is installed (`.ci/run` installs both with rustup); a check that
/// cannot run says so on every run.
fn cross_checks() -> Result<()> {
    const ARM: &str = "aarch64-unknown-linux-gnu";
    // The nested build of libsandbox.so links a cdylib for the target. Debian's cross gcc
    // (gcc-aarch64-linux-gnu) cannot be installed beside gcc-multilib, which the tests need, so
    // the link is the toolchain's own rust-lld against the cross C library's files
    // (libc6-dev-arm64-cross, under /usr/aarch64-linux-gnu/lib).
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .context("running rustc --print sysroot")?;
    let host = xtask::dist::host_triple()?;
    let lld = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim())
        .join("lib/rustlib")
        .join(&host)
        .join("bin/rust-lld");
    let cross_libc = Path::new("/usr/aarch64-linux-gnu/lib");
    if xtask::dist::std_installed(ARM) && lld.is_file() && cross_libc.join("libc.so").exists() {
        run(cargo()
            .args([
                "check",
                "--workspace",
                "--all-targets",
                "--quiet",
                "--target",
                ARM,
            ])
            // Warnings are errors except dead code: the namespace spawner is x86_64-only
            // today, which leaves code only it uses unused on aarch64 (see the README).
            .env("RUSTFLAGS", "-D warnings -A dead_code")
            .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", &lld)
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
                format!("-C linker-flavor=ld.lld -L {}", cross_libc.display()),
            ))?;
    } else {
        eprintln!(
            "warning: aarch64 check skipped: needs `rustup target add {ARM}`, the toolchain's \
             rust-lld and Debian's libc6-dev-arm64-cross"
        );
    }
    let msrv = msrv::workspace_msrv(&root())?;
    let rustup = |args: &[&str]| {
        let mut c = Command::new("rustup");
        c.args(["run", msrv.as_str()]).args(args);
        // rustup run picks the tools; the ones this cargo exported must not override them.
        for var in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTDOC"] {
            c.env_remove(var);
        }
        c
    };
    let installed = rustup(&["rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        // Its own target directory: another compiler's artefacts would evict the main ones.
        run(
            // The shipped crates: xtask's `syscalls` dependency needs a newer compiler than
            // it declares (README, "Minimum supported Rust").
            rustup(&[
                "cargo",
                "check",
                "-p",
                "sandbox-policy",
                "-p",
                "sandbox-preload",
                "-p",
                "sandbox-host",
                "--all-targets",
                "--quiet",
            ])
            .arg("--target-dir")
            .arg(root().join("target/msrv")),
        )?;
    } else {
        eprintln!(
            "warning: build with the minimum supported Rust {msrv} skipped: needs `rustup \
             toolchain install {msrv}`"
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    match args.first().map(String::as_str) {
        Some("codegen") => xtask::codegen::run(&root(), rest.contains(&"--check")),
        Some("build-preload") => {
            println!("{}", build_preload()?.display());
            Ok(())
        }
        Some("ci") => ci(),
        Some("acceptance") => acceptance::run(&root(), rest.first().copied()),
        Some("msrv") => msrv::check(&root()),
        Some("cross") => cross_checks(),
        Some("matrix") => {
            let check = rest.contains(&"--check");
            let cells = xtask::matrix::run(&root(), check);
            if !check {
                xtask::agent_matrix::write_doc(&root())?;
            }
            cells
        }
        Some("bench") => bench::run(&rest),
        Some("dist") => {
            let opts = xtask::dist::DistOptions {
                profile: "release".into(),
                out: root().join("target/dist"),
            };
            let d = xtask::dist::dist(&root(), &opts)?;
            for f in [d.bundle, d.wheel, d.npm] {
                println!("{}", f.display());
            }
            Ok(())
        }
        _ => bail!("usage: cargo xtask <codegen [--check] | build-preload | ci | acceptance [NAME] | msrv | cross | dist | matrix [--check] | bench [--quick] [--oneshot] [--outer] [--exec] [--serve] [--mcp] [--session] [--proxy] [--leaks] [--oci] [--learn] [--violations] [--in-container] [--process-api]>"),
    }
}
