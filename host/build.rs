//! Builds `libsandbox.so` from this workspace with a nested cargo and embeds it.
//!
//! The nested build uses its own target directory (`<workspace>/target/preload-build`), so it
//! never waits on the build-directory lock held by the cargo that runs this script, and it runs
//! with a clean environment: no clippy wrapper, no host-side RUSTFLAGS, no jobserver fds it
//! cannot see. The library is copied into `OUT_DIR` so the embedded bytes cannot change under
//! a build that is still reading them.

use sha2::{Digest, Sha256};
use std::env;
use std::fs;
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

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ has a parent")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));

    for input in [
        "preload/src",
        "preload/Cargo.toml",
        "policy/src",
        "policy/build.rs",
        "policy/Cargo.toml",
        "profiles/groups.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        watch(&workspace.join(input));
    }

    let built = build_preload(&workspace);
    let bytes = fs::read(&built).unwrap_or_else(|e| panic!("reading {}: {e}", built.display()));
    let embedded = out_dir.join("libsandbox.so");
    fs::write(&embedded, &bytes).unwrap_or_else(|e| panic!("writing {}: {e}", embedded.display()));

    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!(
        "cargo:rustc-env=SANDBOX_PRELOAD_PATH={}",
        embedded.display()
    );
    println!("cargo:rustc-env=SANDBOX_PRELOAD_SHA256={hex}");
}

/// Asks cargo to rerun this script when `path` changes; directories are listed file by file,
/// because a directory's own timestamp does not change when a file inside it is edited.
fn watch(path: &Path) {
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            watch(&entry.path());
        }
    }
    println!("cargo:rerun-if-changed={}", path.display());
}

/// Runs `cargo build -p sandbox-preload --profile preload` and returns the library's path.
fn build_preload(workspace: &Path) -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = workspace.join("target").join("preload-build");
    let host = env::var("HOST").expect("HOST");
    let target = env::var("TARGET").expect("TARGET");

    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args([
            "-p",
            "sandbox-preload",
            "--profile",
            "preload",
            "--target-dir",
        ])
        .arg(&target_dir);
    if target != host {
        cmd.args(["--target", &target]);
    }
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if REMOVED.contains(&key) || REMOVED_PREFIXES.iter().any(|p| key.starts_with(p)) {
            cmd.env_remove(key);
        }
    }

    let output = cmd
        .output()
        .expect("running the nested cargo build of sandbox-preload");
    if !output.status.success() {
        panic!(
            "building sandbox-preload failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let mut lib = target_dir;
    if target != host {
        lib.push(&target);
    }
    lib.push("preload");
    lib.push("libsandbox.so");
    lib
}
