//! `sandbox export` and `sandbox import`: profiles to and from OCI / Docker seccomp JSON
//! (the translation is `sandbox_policy::oci`), written atomically so a failed run leaves the
//! destination as it was (docs/containers.md).

use sandbox_policy::oci;
use sandbox_policy::profile::Profile;
use sandbox_policy::{Action, Arch};
use std::io::{Read, Write};
use std::path::Path;

/// Writes `text` to `out` (stdout when `None`): a temporary file beside `out`, then a rename,
/// so readers see the old file or the whole new one, and an error leaves nothing behind.
pub fn write_out(out: Option<&Path>, text: &str) -> Result<(), String> {
    let Some(path) = out else {
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("writing stdout: {e}"));
    };
    let shown = path.display();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(format!("--out {shown}: is a directory"));
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".sandbox-out-")
        .tempfile_in(dir)
        .map_err(|e| format!("--out {shown}: {e}"))?;
    use std::os::unix::fs::PermissionsExt;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .and_then(|()| tmp.write_all(text.as_bytes()))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("--out {shown}: {e}"))?;
    tmp.persist(path)
        .map_err(|e| format!("--out {shown}: {}", e.error))?;
    Ok(())
}

/// The architecture named by `--arch` (default: this machine's).
pub fn arch(name: Option<&str>) -> Result<Arch, String> {
    match name {
        None => Ok(sandbox_policy::NATIVE),
        Some(n) => {
            Arch::from_name(n).ok_or_else(|| format!("--arch: unknown `{n}` (x86_64, aarch64)"))
        }
    }
}

/// Exports `profile` as OCI JSON; returns the text and the notes on what it cannot say.
pub fn export(
    profile: &Profile,
    arch: Arch,
    action: Option<Action>,
) -> Result<oci::Export, String> {
    oci::export(profile, arch, action).map_err(|e| format!("profile {}: {e}", profile.name()))
}

/// The running kernel's (major, minor), for Docker's `minKernel`.
pub fn kernel_version() -> Option<(u32, u32)> {
    oci::parse_kernel(crate::sys::kernel_release().trim())
}

/// Reads `file` (at most [`oci::MAX_IMPORT_BYTES`]) and imports it for this machine.
pub fn import(file: &Path) -> Result<oci::Imported, String> {
    let shown = file.display().to_string();
    let f = std::fs::File::open(file).map_err(|e| format!("{shown}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(oci::MAX_IMPORT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() > oci::MAX_IMPORT_BYTES {
        return Err(format!(
            "{shown}: larger than {} bytes; a seccomp profile is a few KB",
            oci::MAX_IMPORT_BYTES
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let env = oci::DockerEnv::docker_default(kernel_version());
    let origin = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    oci::import(&text, &origin, sandbox_policy::NATIVE, &env).map_err(|e| format!("{shown}: {e}"))
}
