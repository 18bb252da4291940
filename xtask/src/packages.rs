//! The Debian packages the test suite needs (`.ci/packages`, the one list): checked by
//! `cargo xtask ci` before anything runs, so a missing `go` or `tsc` stops it at once with
//! every missing package named, instead of failing tests an hour in.
//!
//! As root on a machine with apt-get the missing packages are installed (said on stderr first);
//! otherwise the check fails naming them and the one command that installs them.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// One line of `.ci/packages`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// The Debian package name.
    pub name: String,
    /// Installed with `--no-install-recommends`.
    pub no_recommends: bool,
    /// A command whose presence on PATH satisfies the line without the package
    /// (`unless-command=npm`: Node.js builds other than Debian's bring their own npm, and
    /// Debian's `npm` package conflicts with them).
    pub unless_command: Option<String>,
}

/// The packages listed in `text` (the format of `.ci/packages`: a name a line, `#` comments,
/// `no-recommends` and `unless-command=NAME` after a name). A line that is not a package name
/// is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Package>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        let mut no_recommends = false;
        let mut unless_command = None;
        for option in words.by_ref() {
            match option {
                "no-recommends" => no_recommends = true,
                o if o.starts_with("unless-command=")
                    && o.len() > "unless-command=".len()
                    && o["unless-command=".len()..]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
                {
                    unless_command = Some(o["unless-command=".len()..].to_string())
                }
                other => bail!(".ci/packages line {}: unknown option `{other}`", i + 1),
            }
        }
        // Debian's policy for package names: lowercase letters, digits, `+`, `-`, `.`.
        let valid = name.len() >= 2
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
        if !valid {
            bail!(
                ".ci/packages line {}: `{line}` is not a package name",
                i + 1
            );
        }
        out.push(Package {
            name: name.to_string(),
            no_recommends,
            unless_command,
        });
    }
    Ok(out)
}

/// The packages of `.ci/packages` under `root`.
pub fn list(root: &Path) -> Result<Vec<Package>> {
    let path = root.join(".ci/packages");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text)
}

/// Those of `pkgs` that dpkg does not have installed.
pub fn missing(pkgs: &[Package]) -> Result<Vec<Package>> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package} ${db:Status-Abbrev}\\n"])
        .args(pkgs.iter().map(|p| &p.name))
        .output()
        .context("running dpkg-query (the test suite needs Debian packages: .ci/packages)")?;
    // dpkg-query exits 1 when a name is unknown to it; the lines of the others still come.
    let text = String::from_utf8_lossy(&out.stdout);
    let installed = |name: &str| {
        text.lines().any(|l| {
            let mut w = l.split_whitespace();
            // `name:arch` for multi-arch packages.
            w.next().and_then(|n| n.split(':').next()) == Some(name) && w.next() == Some("ii")
        })
    };
    let on_path = |cmd: &str| {
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|d| {
                std::fs::metadata(d.join(cmd)).is_ok_and(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
            })
        })
    };
    Ok(pkgs
        .iter()
        .filter(|p| !installed(&p.name))
        .filter(|p| !p.unless_command.as_deref().is_some_and(on_path))
        .cloned()
        .collect())
}

/// The one command that installs `pkgs`.
pub fn install_command(pkgs: &[Package]) -> String {
    let names = |no_rec: bool| -> Vec<&str> {
        pkgs.iter()
            .filter(|p| p.no_recommends == no_rec)
            .map(|p| p.name.as_str())
            .collect()
    };
    let mut parts = vec!["sudo apt-get update".to_string()];
    for (no_rec, flag) in [(false, ""), (true, " --no-install-recommends")] {
        let n = names(no_rec);
        if !n.is_empty() {
            parts.push(format!("sudo apt-get install -y{flag} {}", n.join(" ")));
        }
    }
    parts.join(" && ")
}

/// Whether `ensure` may install what is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Install with apt-get when running as root and apt-get exists; otherwise fail.
    InstallAsRoot,
    /// Fail naming them.
    Fail,
}

/// Checks that every package of `pkgs` is installed; see [`Missing`] for what happens when not.
pub fn ensure(pkgs: &[Package], policy: Missing) -> Result<()> {
    let absent = missing(pkgs)?;
    if absent.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = absent.iter().map(|p| p.name.as_str()).collect();
    // /proc/self belongs to the effective user (no `unsafe` outside the boundary modules).
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self")?) == 0;
    let apt = Command::new("apt-get").arg("--version").output().is_ok();
    if policy == Missing::Fail || !root || !apt {
        bail!(
            "the tests need Debian packages that are not installed: {}; install them with: {}",
            names.join(" "),
            install_command(&absent)
        );
    }
    eprintln!(
        "xtask ci: installing the Debian packages the tests need (root, apt-get): {}",
        names.join(" ")
    );
    let apt_get = |args: &[&str], names: &[&str]| -> Result<()> {
        let status = Command::new("apt-get")
            .args(args)
            .args(names)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .context("running apt-get")?;
        if !status.success() {
            bail!(
                "apt-get {} {} failed: {status}",
                args.join(" "),
                names.join(" ")
            );
        }
        Ok(())
    };
    apt_get(&["update", "-qq"], &[])?;
    for no_rec in [false, true] {
        let group: Vec<&str> = absent
            .iter()
            .filter(|p| p.no_recommends == no_rec)
            .map(|p| p.name.as_str())
            .collect();
        if group.is_empty() {
            continue;
        }
        let mut args = vec!["install", "-y", "-qq"];
        if no_rec {
            args.push("--no-install-recommends");
        }
        apt_get(&args, &group)?;
    }
    let still = missing(pkgs)?;
    if !still.is_empty() {
        let names: Vec<&str> = still.iter().map(|p| p.name.as_str()).collect();
        bail!("still not installed after apt-get: {}", names.join(" "));
    }
    Ok(())
}
