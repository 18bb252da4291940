//! The one build of the shipped `libsandbox.so`, shared by host/build.rs (which embeds it) and
//! `cargo xtask build-preload` (which prints its path), so both run the same command into the
//! same directory and there is a single library to pick up.
//!
//! The library is built with `cargo rustc --profile preload --crate-type cdylib`: the preload
//! crate itself is an rlib, so a plain `cargo build` or `cargo test --workspace` (std,
//! unwinding) never writes a second, std `libsandbox.so` into `target/`.
//!
//! The nested cargo uses its own target directory (`<target>/preload-build`), so it never waits
//! on the build-directory lock held by the cargo that runs the build script, and it runs with a
//! clean environment: no clippy wrapper, no host-side RUSTFLAGS, no jobserver fds it cannot see.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variables removed from the nested cargo, by exact name.
const REMOVED: &[&str] = &[
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "OUT_DIR",
];

/// Environment variables removed from the nested cargo, by prefix.
const REMOVED_PREFIXES: &[&str] = &[
    "CARGO_PROFILE_",
    "CARGO_CFG_",
    "CARGO_FEATURE_",
    "CARGO_PKG_",
    "__CARGO",
];

/// The target directory of the cargo that runs a build script, from the script's `OUT_DIR`
/// (`<target>[/<triple>]/<profile>/build/<package>-<hash>/out`), so `CARGO_TARGET_DIR`,
/// `--target-dir` and `build.target-dir` are all honoured. `None` when the path has another
/// shape.
pub fn target_root_of(out_dir: &Path, target: &str) -> Option<PathBuf> {
    let build = out_dir.parent()?.parent()?;
    if build.file_name()? != "build" {
        return None;
    }
    let mut root = build.parent()?.parent()?;
    if root.file_name()? == OsStr::new(target) {
        root = root.parent()?;
    }
    Some(root.to_path_buf())
}

/// The triple the library is built for when the binary embedding it is built for `target`:
/// the same, except that a musl target's library is the matching GNU one, because the library
/// is preloaded into the machine's dynamically linked (glibc) programs, not into `sandbox`.
pub fn preload_target(target: &str) -> String {
    match target.strip_suffix("-linux-musl") {
        Some(arch_vendor) => format!("{arch_vendor}-linux-gnu"),
        None => target.to_string(),
    }
}

/// The nested build's own target directory inside the target directory `target_root`.
pub fn target_dir(target_root: &Path) -> PathBuf {
    target_root.join("preload-build")
}

/// The command that builds the shipped library into `target_dir`; `target` is the triple to
/// cross-build for, `None` for the machine's own.
pub fn command(
    cargo: &OsStr,
    workspace: &Path,
    target_dir: &Path,
    target: Option<&str>,
) -> Command {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["rustc", "--quiet", "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .args([
            "-p",
            "sandbox-preload",
            "--lib",
            "--profile",
            "preload",
            "--crate-type",
            "cdylib",
            "--target-dir",
        ])
        .arg(target_dir);
    if let Some(target) = target {
        cmd.args(["--target", target]);
    }
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if REMOVED.contains(&key) || REMOVED_PREFIXES.iter().any(|p| key.starts_with(p)) {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Where [`command`] leaves the library.
pub fn library(target_dir: &Path, target: Option<&str>) -> PathBuf {
    let mut lib = target_dir.to_path_buf();
    if let Some(target) = target {
        lib.push(target);
    }
    lib.push("preload");
    lib.push("libsandbox.so");
    lib
}
