//! `cargo xtask dist`: the release files in `target/dist/`, all around one build of the binary:
//!
//! - `sandbox-<version>-<target>.tar.gz`, the bundle, named for the binary it holds
//!   (`x86_64-unknown-linux-musl` for the static build, the host's triple otherwise). It holds
//!   `bin/sandbox`, `lib/libsandbox.so` (extracted from that very binary, so the two never
//!   disagree), the built-in profiles, one man page per subcommand (clap_mangen), bash, zsh and
//!   fish completions (clap_complete), `docs/` (the pages the help points to), README and
//!   licences, and `SHA256SUMS` of every file;
//! - the Python wheel `kernel_sandbox-<version>-py3-none-<platform>.whl` (dist_wheel.rs);
//! - the npm tarball `kernel-sandbox-<version>.tgz` (dist_npm.rs);
//! - `SHA256SUMS` of those three.
//!
//! The binary is built with the workspace and cargo's home remapped (`--remap-path-prefix`), so
//! no path of the build machine is baked in and the files work wherever they are unpacked.
//!
//! The shipped binary is fully static (musl, `<arch>-unknown-linux-musl`) where that target's
//! standard library is installed (`rustup target add x86_64-unknown-linux-musl`): it runs on any
//! Linux of its architecture, and it starts about 0.7 ms of CPU sooner per command than the
//! dynamically linked glibc build on the machines we measure (no dynamic loader, and none of
//! glibc's start-up `cpuid` probes, each a trap to the hypervisor in a VM; see
//! docs/benchmarks.md). The embedded `libsandbox.so` is the same glibc-target library either way
//! (host/build.rs). Without the musl target the bundle holds the host's default build, and says so.

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the binary is built: `release` for the bundle; tests use `dev`, which is faster and
/// carries debug information, so it checks the path remapping harder.
pub struct DistOptions {
    /// Cargo profile.
    pub profile: String,
    /// Where the bundle, the wheel, the npm tarball and their `SHA256SUMS` go.
    pub out: PathBuf,
}

/// The host target triple, from `rustc -vV`.
pub fn host_triple() -> Result<String> {
    let o = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV printed no host line")
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
        })
}

/// The fully static target of the host's architecture: `x86_64-unknown-linux-gnu` gives
/// `x86_64-unknown-linux-musl`; `None` for a host that is not `<arch>-unknown-linux-<libc>`.
pub fn static_target(host: &str) -> Option<String> {
    let arch = host.strip_suffix("-unknown-linux-gnu")?;
    Some(format!("{arch}-unknown-linux-musl"))
}

/// Whether the standard library of `triple` is installed for the toolchain in use.
pub fn std_installed(triple: &str) -> bool {
    Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "target-libdir", "--target", triple])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|dir| {
            std::fs::read_dir(dir).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-")))
            })
        })
}

/// The RUSTFLAGS of the shipped build: the workspace and cargo's home remapped, so that no path
/// of the build machine is baked in. `cargo install` with the same flags and target directory
/// reuses that build (the packages test does).
pub fn remap_flags(root: &Path) -> String {
    format!(
        "--remap-path-prefix={}=/sandbox --remap-path-prefix={}=/cargo",
        root.display(),
        cargo_home().display()
    )
}

pub use crate::built::Built;

/// Builds the `sandbox` binary as the bundle ships it, with cargo profile `profile`, into
/// `<root>/target/dist-build` (shared by `dist`, the benchmarks and CI, so each builds it once):
/// fully static when the musl target is installed, else the host's default build, with a line
/// on stderr saying why.
pub fn build_shipped(root: &Path, profile: &str) -> Result<Built> {
    let host = host_triple()?;
    let wanted = static_target(&host);
    let triple = match &wanted {
        Some(t) if std_installed(t) => t.clone(),
        Some(t) => {
            eprintln!(
                "note: the {t} standard library is not installed (rustup target add {t}): \
                 building the dynamically linked {host} binary instead of the static one"
            );
            host.clone()
        }
        None => host.clone(),
    };
    let target_dir = root.join("target/dist-build");
    let remap = remap_flags(root);
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "-p", "sandbox-host", "--bin", "sandbox"])
        .args(["--profile", profile, "--target", &triple, "--target-dir"])
        .arg(&target_dir)
        .env("RUSTFLAGS", &remap)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .current_dir(root)
        .status()
        .context("starting cargo build")?;
    if !status.success() {
        bail!("cargo build of the sandbox binary failed: {status}");
    }
    let dir_name = if profile == "dev" { "debug" } else { profile };
    Ok(Built {
        path: target_dir.join(&triple).join(dir_name).join("sandbox"),
        fully_static: Some(&triple) == wanted.as_ref(),
        triple,
    })
}

/// What `cargo xtask dist` wrote.
pub struct Dist {
    /// `sandbox-<version>-<target>.tar.gz`.
    pub bundle: PathBuf,
    /// The Python wheel (dist_wheel.rs).
    pub wheel: PathBuf,
    /// The npm tarball (dist_npm.rs).
    pub npm: PathBuf,
    /// The binary all three carry, and what it was built for.
    pub built: Built,
}

/// Builds the bundle, the wheel and the npm tarball around one build of the binary, and writes
/// `SHA256SUMS` of the three.
pub fn dist(root: &Path, opts: &DistOptions) -> Result<Dist> {
    let built = build_shipped(root, &opts.profile)?;
    std::fs::create_dir_all(&opts.out)?;
    let bundle = bundle(root, &built, &opts.out)?;
    let wheel = crate::dist_wheel::wheel(root, &built, &opts.out)?;
    let npm = crate::dist_npm::npm_package(root, &built, &opts.out)?;
    let mut sums = String::new();
    for f in [&bundle, &wheel, &npm] {
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        sums += &format!("{}  {name}\n", hex(&Sha256::digest(std::fs::read(f)?)));
    }
    std::fs::write(opts.out.join("SHA256SUMS"), sums)?;
    Ok(Dist {
        bundle,
        wheel,
        npm,
        built,
    })
}

/// The bundle's name: named for the binary it holds, `x86_64-unknown-linux-musl` for the static
/// build (it runs on any Linux of its architecture), the host's triple otherwise.
pub fn bundle_name(built: &Built) -> String {
    format!("sandbox-{}-{}", env!("CARGO_PKG_VERSION"), built.triple)
}

/// The release tarball; returns its path.
fn bundle(root: &Path, built: &Built, out: &Path) -> Result<PathBuf> {
    let name = bundle_name(built);
    let built = &built.path;

    let stage_parent = tempfile::tempdir()?;
    let stage = stage_parent.path().join(&name);
    let mkdir = |p: &str| -> Result<PathBuf> {
        let d = stage.join(p);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        Ok(d)
    };
    let bin = mkdir("bin")?.join("sandbox");
    std::fs::copy(built, &bin).with_context(|| format!("copying {}", built.display()))?;
    let lib = mkdir("lib")?.join("libsandbox.so");
    let o = Command::new(&bin)
        .arg("extract")
        .arg("--to")
        .arg(&lib)
        .output()?;
    if !o.status.success() {
        bail!(
            "sandbox extract: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let profiles = mkdir("share/sandbox/profiles")?;
    for entry in std::fs::read_dir(root.join("profiles"))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "toml") {
            std::fs::copy(&p, profiles.join(p.file_name().unwrap()))?;
        }
    }
    man_pages(&mkdir("share/man/man1")?)?;
    for (shell, dir) in [
        (
            sandbox_host::cli::Shell::Bash,
            "share/bash-completion/completions",
        ),
        (sandbox_host::cli::Shell::Zsh, "share/zsh/site-functions"),
        (
            sandbox_host::cli::Shell::Fish,
            "share/fish/vendor_completions.d",
        ),
    ] {
        let mut text = Vec::new();
        sandbox_host::cli::completions(shell, &mut text);
        std::fs::write(mkdir(dir)?.join(shell.file_name()), text)?;
    }
    for f in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        std::fs::copy(root.join(f), stage.join(f)).with_context(|| format!("copying {f}"))?;
    }
    // The pages the help and README point to (`docs/paths.md`...), at the same relative place.
    let docs = mkdir("docs")?;
    for entry in std::fs::read_dir(root.join("docs"))? {
        let p = entry?.path();
        if p.is_file() {
            std::fs::copy(&p, docs.join(p.file_name().unwrap()))?;
        }
    }
    let sums = sha256_lines(&stage)?;
    std::fs::write(stage.join("SHA256SUMS"), sums)?;

    let tarball = out.join(format!("{name}.tar.gz"));
    // Reproducible archive: sorted names, fixed owner and time, and gzip told not to store the
    // name and time (`-n`; the GZIP variable that used to say so is deprecated and warns).
    let status = Command::new("tar")
        .args([
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mtime=@0",
            "--use-compress-program=gzip -n",
            "-cf",
        ])
        .arg(&tarball)
        .arg("-C")
        .arg(stage_parent.path())
        .arg(&name)
        .status()
        .context("starting tar")?;
    if !status.success() {
        bail!("tar failed: {status}");
    }
    Ok(tarball)
}

/// `sandbox.1` and a page per subcommand, from the CLI definition (see `crate::man`).
fn man_pages(dir: &Path) -> Result<()> {
    crate::man::write_pages(dir)
}

/// `sha256sum` lines for every file under `dir`, sorted by path.
fn sha256_lines(dir: &Path) -> Result<String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = String::new();
    for f in files {
        let rel = f.strip_prefix(dir)?.display().to_string();
        out += &format!("{}  {rel}\n", hex(&Sha256::digest(std::fs::read(&f)?)));
    }
    Ok(out)
}

/// Lower-case hexadecimal of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
