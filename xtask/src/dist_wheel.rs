//! The Python wheel of `cargo xtask dist`: `kernel_sandbox-<version>-py3-none-<platform>.whl`.
//!
//! It carries the shipped `sandbox` binary as a script (`<name>.data/scripts/sandbox`, which pip
//! installs into the environment's `bin/` as it is: no Python wrapper between the caller and
//! the binary, so no interpreter start-up per command) and the `kernel_sandbox` package: the
//! client of `examples/python/sandbox_client.py` as `kernel_sandbox.client`, and
//! `packages/python/kernel_sandbox/` around it (finding the installed binary).
//!
//! The wheel is written here rather than by maturin: maturin would build the binary itself,
//! outside the one build the bundle, the npm package and CI's escape suite share (static,
//! remapped paths, the embedded preload), and it is not installed offline. A wheel is a zip
//! with three small text files (PEP 427), so writing it is short; the archive is reproducible
//! (sorted names, fixed times).

use crate::built::Built;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The distribution's name on PyPI and in the wheel's file name (`kernel-sandbox`; PEP 503
/// normalised to `kernel_sandbox` in file names). `sandbox` and `agent-sandbox` are taken.
pub const DIST_NAME: &str = "kernel-sandbox";

/// The import name.
pub const PACKAGE: &str = "kernel_sandbox";

/// The platform part of the wheel's tag for `built`.
///
/// The static build needs no C library at all, so it runs wherever pip runs on its
/// architecture: it is tagged for both glibc and musl systems (a compressed tag set, PEP 425),
/// with glibc 2.17 (`manylinux2014`) as the glibc floor, the oldest the Python packaging tools
/// still build for. A dynamically linked build needs the glibc it was linked against or newer:
/// it is tagged `manylinux_<that version>`, which pip refuses on older systems instead of the
/// binary failing to start.
pub fn platform_tag(built: &Built) -> Result<String> {
    let arch = built
        .triple
        .split('-')
        .next()
        .filter(|a| !a.is_empty())
        .with_context(|| format!("no architecture in {}", built.triple))?;
    if built.fully_static {
        return Ok(format!(
            "manylinux_2_17_{arch}.manylinux2014_{arch}.musllinux_1_1_{arch}"
        ));
    }
    let o = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .context("running getconf GNU_LIBC_VERSION")?;
    let text = String::from_utf8_lossy(&o.stdout);
    let version = text.trim().strip_prefix("glibc ").with_context(|| {
        format!("getconf GNU_LIBC_VERSION printed {text:?}: not a glibc system; build the static binary (rustup target add {arch}-unknown-linux-musl)")
    })?;
    let (major, minor) = version
        .split_once('.')
        .with_context(|| format!("glibc version {version:?}"))?;
    Ok(format!("manylinux_{major}_{minor}_{arch}"))
}

/// The version as PEP 440 has it; a Cargo pre-release (`0.2.0-rc.1`) is refused rather than
/// guessed at: map it here when the project first makes one.
fn pep440(version: &str) -> Result<&str> {
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        bail!(
            "version {version:?} is not a plain release number; map it to PEP 440 in dist_wheel.rs"
        );
    }
    Ok(version)
}

/// Base64 with the URL-safe alphabet and no padding, as RECORD wants the hashes.
fn urlsafe_b64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// One file of the wheel: its path inside the archive, its bytes, whether it is executable.
struct Entry {
    name: String,
    data: Vec<u8>,
    executable: bool,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Writes the wheel into `out`; returns its path.
pub fn wheel(root: &Path, built: &Built, out: &Path) -> Result<PathBuf> {
    let version = pep440(env!("CARGO_PKG_VERSION"))?;
    let platform = platform_tag(built)?;
    let norm = DIST_NAME.replace('-', "_");
    let dist_info = format!("{norm}-{version}.dist-info");
    let readme = String::from_utf8(read(&root.join("packages/python/README.md"))?)?;

    let mut files = Vec::new();
    let src = root.join("packages/python").join(PACKAGE);
    let mut names: Vec<_> = std::fs::read_dir(&src)
        .with_context(|| format!("reading {}", src.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    names.sort();
    for p in names
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
    {
        let file = p.file_name().unwrap_or_default().to_string_lossy();
        files.push(Entry {
            name: format!("{PACKAGE}/{file}"),
            data: read(p)?,
            executable: false,
        });
    }
    files.push(Entry {
        name: format!("{PACKAGE}/client.py"),
        data: read(&root.join("examples/python/sandbox_client.py"))?,
        executable: false,
    });
    // PEP 561: the client is typed, and type checkers may use it.
    files.push(Entry {
        name: format!("{PACKAGE}/py.typed"),
        data: Vec::new(),
        executable: false,
    });
    files.push(Entry {
        name: format!("{norm}-{version}.data/scripts/sandbox"),
        data: read(&built.path)?,
        executable: true,
    });
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let metadata = format!(
        "Metadata-Version: 2.1\n\
         Name: {DIST_NAME}\n\
         Version: {version}\n\
         Summary: Kernel-enforced confinement for the commands AI agents run: the sandbox binary and its Python client\n\
         License: MIT OR Apache-2.0\n\
         Requires-Python: >=3.8\n\
         Classifier: Operating System :: POSIX :: Linux\n\
         Classifier: License :: OSI Approved :: MIT License\n\
         Classifier: License :: OSI Approved :: Apache Software License\n\
         Description-Content-Type: text/markdown\n\
         \n\
         {readme}"
    );
    let mut wheel_file =
        String::from("Wheel-Version: 1.0\nGenerator: sandbox xtask dist\nRoot-Is-Purelib: false\n");
    for p in platform.split('.') {
        wheel_file += &format!("Tag: py3-none-{p}\n");
    }
    // The dist-info directory comes last, RECORD last of all (PEP 427's recommendation: an
    // installer can read the files before the record of them).
    for (name, data) in [
        ("LICENSE-APACHE", read(&root.join("LICENSE-APACHE"))?),
        ("LICENSE-MIT", read(&root.join("LICENSE-MIT"))?),
        ("METADATA", metadata.into_bytes()),
        ("WHEEL", wheel_file.into_bytes()),
    ] {
        files.push(Entry {
            name: format!("{dist_info}/{name}"),
            data,
            executable: false,
        });
    }
    let mut record = String::new();
    for f in &files {
        let hash = urlsafe_b64(&Sha256::digest(&f.data));
        record += &format!("{},sha256={hash},{}\n", f.name, f.data.len());
    }
    record += &format!("{dist_info}/RECORD,,\n");
    files.push(Entry {
        name: format!("{dist_info}/RECORD"),
        data: record.into_bytes(),
        executable: false,
    });

    let path = out.join(format!("{norm}-{version}-py3-none-{platform}.whl"));
    write_zip(&path, &files)?;
    Ok(path)
}

/// The archive, deflated, every entry dated 1980-01-01 (the zip format's epoch) so that the
/// same inputs give the same bytes.
fn write_zip(path: &Path, files: &[Entry]) -> Result<()> {
    use zip::write::SimpleFileOptions;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut zip = zip::ZipWriter::new(file);
    for f in files {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(if f.executable { 0o755 } else { 0o644 });
        zip.start_file(f.name.as_str(), options)?;
        zip.write_all(&f.data)?;
    }
    zip.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hashes_are_urlsafe_base64_without_padding() {
        assert_eq!(urlsafe_b64(b""), "");
        assert_eq!(urlsafe_b64(b"f"), "Zg");
        assert_eq!(urlsafe_b64(b"fo"), "Zm8");
        assert_eq!(urlsafe_b64(b"foo"), "Zm9v");
        assert_eq!(urlsafe_b64(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn pre_releases_are_refused_not_guessed() {
        assert!(pep440("0.1.0").is_ok());
        for bad in ["", "0.2.0-rc.1", "1.0\n", "1.0\0"] {
            assert!(pep440(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_static_build_is_tagged_for_glibc_and_musl() {
        let built = Built {
            path: PathBuf::new(),
            triple: "x86_64-unknown-linux-musl".into(),
            fully_static: true,
        };
        assert_eq!(
            platform_tag(&built).unwrap(),
            "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64"
        );
    }
}
