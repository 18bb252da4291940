//! The minimum-supported-Rust-version check of `cargo xtask ci`.
//!
//! Only the current stable toolchain is installed where CI runs, so the MSRV is not checked by
//! building with that old compiler. Instead:
//! - every workspace package declares the workspace's `rust-version` (checked here), which is
//!   what clippy's `incompatible_msrv` lint reads: `ci` runs clippy with that lint as an error,
//!   so a std API stabilised after the MSRV is refused;
//! - no locked dependency declares a newer `rust-version` (checked here, from `cargo metadata`).
//!
//! What this does not catch: language features newer than the MSRV (clippy checks std APIs
//! only) and dependencies that need a newer compiler without saying so.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// A `rust-version` value: `1.85` or `1.85.0`.
fn parse(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().unwrap_or(Some(0))?;
    let patch = parts.next().unwrap_or(Some(0))?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

/// The `rust-version` of the workspace's `[workspace.package]`.
pub(crate) fn workspace_msrv(root: &Path) -> Result<String> {
    let path = root.join("Cargo.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("rust-version"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .next()
        .with_context(|| format!("{}: no rust-version", path.display()))
}

/// Fails when a workspace package does not declare the MSRV or a dependency needs a newer one.
pub fn check(root: &Path) -> Result<()> {
    let msrv = workspace_msrv(root)?;
    let want = parse(&msrv).with_context(|| format!("rust-version `{msrv}` is not a version"))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .context("cargo metadata: no workspace_members")?
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut problems = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or("?");
        let declared = package["rust_version"].as_str();
        let member = package["id"]
            .as_str()
            .is_some_and(|id| members.contains(&id));
        match (member, declared.and_then(parse)) {
            (true, Some(v)) if v == want => {}
            (true, _) => problems.push(format!(
                "{name} declares rust-version {}, not the workspace's {msrv} (use rust-version.workspace = true)",
                declared.unwrap_or("none")
            )),
            (false, Some(v)) if v > want => problems.push(format!(
                "dependency {name} {} needs Rust {}, newer than the MSRV {msrv}",
                package["version"].as_str().unwrap_or("?"),
                declared.unwrap_or("?")
            )),
            (false, _) => {}
        }
    }
    if !problems.is_empty() {
        bail!("MSRV check: {}", problems.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(parse("1.85"), Some((1, 85, 0)));
        assert_eq!(parse("1.85.1"), Some((1, 85, 1)));
        assert!(parse("1.86") > parse("1.85.3"));
        assert_eq!(parse("1.x"), None);
        assert_eq!(parse("1.2.3.4"), None);
        assert_eq!(parse(""), None);
    }
}
