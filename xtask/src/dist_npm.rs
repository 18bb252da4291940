//! The npm package of `cargo xtask dist`: `kernel-sandbox-<version>.tgz`, made by `npm pack`.
//!
//! It holds the TypeScript client of `examples/typescript/sandbox_client.ts` and
//! `packages/npm/index.ts` (which defaults it to the shipped binary), compiled by `tsc` to
//! CommonJS with `.d.ts` declarations, and the shipped `sandbox` binary as `bin/sandbox`, the
//! package's `bin` entry: `npm install` links it into `node_modules/.bin/`, so `npx sandbox`
//! runs it directly (no Node.js wrapper, no start-up cost per command). No dependencies and no
//! install scripts, so `npm install --offline ./kernel-sandbox-<version>.tgz` works.
//!
//! One tarball per architecture: npm has no per-platform file names, so `os` and `cpu` in
//! package.json say what it is for and npm refuses it elsewhere.

use crate::built::Built;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The package's name on npm (`sandbox` and `agent-sandbox` are taken).
pub const NAME: &str = "kernel-sandbox";

/// npm's name for the architecture of a target triple (`process.arch`).
pub fn npm_cpu(triple: &str) -> Result<&'static str> {
    match triple.split('-').next() {
        Some("x86_64") => Ok("x64"),
        Some("aarch64") => Ok("arm64"),
        _ => bail!("no npm cpu name for {triple}: add it to dist_npm.rs"),
    }
}

/// Runs `cmd`, failing with its stderr, or naming the Debian package when it is missing.
fn output(cmd: &mut Command, package: &str) -> Result<Output> {
    let shown = format!("{cmd:?}");
    let o = cmd
        .output()
        .with_context(|| format!("starting {shown} (Debian package {package})"))?;
    if !o.status.success() {
        bail!(
            "{shown}: {}\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(o)
}

/// The package.json for `version` and the binary's triple.
fn package_json(version: &str, triple: &str) -> Result<String> {
    let json = serde_json::json!({
        "name": NAME,
        "version": version,
        "description": "Kernel-enforced confinement for the commands AI agents run: the sandbox binary and its TypeScript client",
        "license": "MIT OR Apache-2.0",
        "main": "dist/index.js",
        "types": "dist/index.d.ts",
        "bin": { "sandbox": "bin/sandbox" },
        "files": ["dist", "bin", "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
        "os": ["linux"],
        "cpu": [npm_cpu(triple)?],
        "engines": { "node": ">=16" },
    });
    Ok(serde_json::to_string_pretty(&json)? + "\n")
}

/// Compiles the client, stages the package and packs it into `out`; returns the tarball.
pub fn npm_package(root: &Path, built: &Built, out: &Path) -> Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let temp = tempfile::tempdir()?;
    let stage = temp.path().join("package");
    let src = temp.path().join("src");
    std::fs::create_dir_all(stage.join("bin"))?;
    std::fs::create_dir_all(&src)?;
    for (from, to) in [
        ("examples/typescript/sandbox_client.ts", "sandbox_client.ts"),
        ("examples/typescript/node-shims.d.ts", "node-shims.d.ts"),
        ("packages/npm/index.ts", "index.ts"),
    ] {
        std::fs::copy(root.join(from), src.join(to)).with_context(|| format!("copying {from}"))?;
    }
    // The example's own settings, plus declarations; `types: []` keeps the build offline
    // (no @types/node: node-shims.d.ts declares the little it uses).
    let tsconfig = serde_json::json!({
        "compilerOptions": {
            "target": "es2019",
            "module": "commonjs",
            "strict": true,
            "types": [],
            "declaration": true,
            "outDir": stage.join("dist"),
        },
        "files": ["node-shims.d.ts", "sandbox_client.ts", "index.ts"],
    });
    std::fs::write(src.join("tsconfig.json"), tsconfig.to_string())?;
    output(Command::new("tsc").arg("-p").arg(&src), "node-typescript")?;

    let bin = stage.join("bin/sandbox");
    std::fs::copy(&built.path, &bin)
        .with_context(|| format!("copying {}", built.path.display()))?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
    std::fs::copy(root.join("packages/npm/README.md"), stage.join("README.md"))?;
    for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
        std::fs::copy(root.join(f), stage.join(f))?;
    }
    std::fs::write(
        stage.join("package.json"),
        package_json(version, &built.triple)?,
    )?;

    // A cache of its own: packing needs nothing from the registry, and must not write into
    // the caller's ~/.npm.
    output(
        Command::new("npm")
            .args(["pack", "--offline", "--silent", "--pack-destination"])
            .arg(out)
            .env("npm_config_cache", temp.path().join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .current_dir(&stage),
        "npm",
    )?;
    let tgz = out.join(format!("{NAME}-{version}.tgz"));
    if !tgz.is_file() {
        bail!("npm pack did not write {}", tgz.display());
    }
    Ok(tgz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_json_names_the_binary_and_the_platform() {
        let p: serde_json::Value =
            serde_json::from_str(&package_json("0.1.0", "x86_64-unknown-linux-musl").unwrap())
                .unwrap();
        assert_eq!(p["bin"]["sandbox"], "bin/sandbox");
        assert_eq!(p["cpu"], serde_json::json!(["x64"]));
        assert_eq!(p["os"], serde_json::json!(["linux"]));
        assert!(package_json("0.1.0", "riscv64gc-unknown-linux-gnu").is_err());
    }
}
