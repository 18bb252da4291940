//! Builds `libsandbox.so` from this workspace with a nested cargo (see `preload_build.rs`) and
//! embeds it. The library is copied into `OUT_DIR` so the embedded bytes cannot change under a
//! build that is still reading them.

use sha2::{Digest, Sha256};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

#[path = "preload_build.rs"]
mod preload_build;

#[path = "credentials_build.rs"]
mod credentials_build;

#[cfg(feature = "process-api")]
#[path = "proto_build.rs"]
mod proto_build;

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
        "host/preload_build.rs",
        "host/credentials_build.rs",
        "profiles/credentials.toml",
    ] {
        watch(&workspace.join(input));
    }

    credentials_build::generate(&workspace.join("profiles/credentials.toml"), &out_dir);

    #[cfg(feature = "process-api")]
    {
        watch(&workspace.join("proto"));
        proto_build::generate(&workspace.join("proto"), &out_dir);
    }

    let built = build_preload(&workspace, &out_dir);
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
    version(&workspace);
}

/// What `sandbox --version` says besides the version: the commit (`SANDBOX_COMMIT` when the
/// packager sets it, else the checkout's own, else `unknown`: a crates.io build has none), the
/// target and the features built in.
fn version(workspace: &Path) {
    println!("cargo:rerun-if-env-changed=SANDBOX_COMMIT");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = match env::var("SANDBOX_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => {
            // A new commit, or another branch, changes these files: the commit is read again.
            for path in ["HEAD", "packed-refs"] {
                if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={}", workspace.join(p).display());
                }
            }
            if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(p) = git(&["rev-parse", "--git-path", &head]) {
                    println!("cargo:rerun-if-changed={}", workspace.join(p).display());
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    let target = env::var("TARGET").unwrap_or_default();
    let features: Vec<String> = env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_lowercase))
        .filter(|f| f != "default")
        .map(|f| f.replace('_', "-"))
        .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!(
        "cargo:rustc-env=SANDBOX_LONG_VERSION={} (commit {commit}, {target}, features: {features})",
        env::var("CARGO_PKG_VERSION").unwrap_or_default()
    );
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

/// Runs the nested build of the shipped library and returns its path.
/// It goes under the target directory this build uses (`CARGO_TARGET_DIR` or `--target-dir`
/// included), read from `OUT_DIR`; `<workspace>/target` only if `OUT_DIR` has an unknown shape.
fn build_preload(workspace: &Path, out_dir: &Path) -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let host = env::var("HOST").expect("HOST");
    let target = env::var("TARGET").expect("TARGET");
    let target_root =
        preload_build::target_root_of(out_dir, &target).unwrap_or_else(|| workspace.join("target"));
    let target_dir = preload_build::target_dir(&target_root);
    // The library is loaded into the machine's ordinary, dynamically linked programs, whatever
    // the C library of the `sandbox` binary embedding it: a fully static musl build of the
    // binary (the release bundle's, see xtask/src/dist.rs) embeds the same glibc-target library.
    let preload_target = preload_build::preload_target(&target);
    let cross = (preload_target != host).then_some(preload_target.as_str());

    let output = preload_build::command(&cargo, workspace, &target_dir, cross)
        .output()
        .expect("running the nested cargo build of sandbox-preload");
    if !output.status.success() {
        panic!(
            "building sandbox-preload failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    preload_build::library(&target_dir, cross)
}
