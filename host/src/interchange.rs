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

/// Calls runc makes after installing the container's filter and before exec when the
/// container runs without no_new_privs (Docker's default: runc then installs the filter while
/// it still holds its privileges, then drops capabilities and switches user), measured with
/// runc 1.1 under strace: `capset` always, `setgroups`, `setgid` and `setuid` for the user
/// switch. Without them the container dies before it starts (`container process is already
/// dead`), so the export allows them; they change nothing a process without the matching
/// capabilities can do.
pub const RUNTIME_START_CALLS: &[&str] = &["capset", "setgroups", "setgid", "setuid"];

/// The Landlock calls `sandbox` makes in a container ([`for_container`] with `for_sandbox`).
pub const SANDBOX_CALLS: &[&str] = &[
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
];

/// The calls `sandbox`'s supervisor makes in the contained tier to act for a job
/// ([`for_container`] with `for_sandbox`): it takes the job's socket to connect it, and its
/// new terminal's master to open the peer (docs/isolation.md). Without them it leaves both to
/// the profile and says so.
pub const SANDBOX_SUPERVISOR_CALLS: &[&str] = &["pidfd_open", "pidfd_getfd"];

/// What `sandbox` in a container with the profile would be stopped by: `clone` with namespace
/// flags falls to the built-in profiles' default action (kill), which would end `sandbox`
/// itself; answered EPERM (as Docker's own profile does), the engine runs without namespaces
/// and says so (the contained tier).
pub const SANDBOX_NAMESPACE_DENY: &str = "clone(a0 & CLONE_NEWALL != 0)=EPERM";

/// `profile` made fit to start a container under Docker's defaults: [`RUNTIME_START_CALLS`]
/// the profile refuses added to its allow list (unless it refuses `execve`, which no addition
/// makes startable); with `for_sandbox`, also [`SANDBOX_CALLS`], [`SANDBOX_SUPERVISOR_CALLS`] and
/// [`SANDBOX_NAMESPACE_DENY`], so that `sandbox` runs inside the container. Returns the profile
/// and one note per change (said on stderr). A call the profile's own deny list names is left
/// refused, and said: the deny list is the user's word.
pub fn for_container(
    profile: &Profile,
    arch: Arch,
    action: Option<Action>,
    for_sandbox: bool,
) -> Result<(Profile, Vec<String>), String> {
    let name = profile.name().to_string();
    let err = |e: &dyn std::fmt::Display| format!("profile {name}: {e}");
    let Some(policy) = profile.policy(arch, action).map_err(|e| err(&e))? else {
        return Ok((profile.clone(), Vec::new()));
    };
    let refused = |call: &str| {
        arch.syscall_number(call)
            .is_some_and(|nr| policy.decide(nr, &[0; 6]) != Action::Allow)
    };
    let named_in_deny = |call: &str| {
        profile
            .deny()
            .iter()
            .any(|d| d.split(['(', '=']).next().is_some_and(|n| n.trim() == call))
    };
    let mut notes = Vec::new();
    let add = |calls: &[&str], why: &str, notes: &mut Vec<String>| -> Vec<String> {
        let (kept, added): (Vec<&str>, Vec<&str>) = calls
            .iter()
            .copied()
            .filter(|c| refused(c))
            .partition(|c| named_in_deny(c) || profile.allow().is_none());
        if !added.is_empty() {
            notes.push(format!(
                "added to the allow list: {} ({why})",
                added.join(", ")
            ));
        }
        if !kept.is_empty() {
            notes.push(format!(
                "left refused, as the profile's deny list says: {} ({why})",
                kept.join(", ")
            ));
        }
        added.iter().map(|c| c.to_string()).collect()
    };
    // A profile that refuses execve cannot start a container whatever else it allows (the
    // export says so): nothing is added to it for runc.
    let starts = !refused("execve");
    let mut allow = add(
        if starts { RUNTIME_START_CALLS } else { &[] },
        "runc's own calls between installing the filter and exec when no_new_privs is unset \
         (Docker's default): its capability drop and user switch",
        &mut notes,
    );
    let mut deny = Vec::new();
    if for_sandbox {
        allow.extend(add(
            SANDBOX_CALLS,
            "the calls of sandbox's Landlock layer",
            &mut notes,
        ));
        allow.extend(add(
            SANDBOX_SUPERVISOR_CALLS,
            "the calls of sandbox's supervisor, which connects a job's unix sockets and opens \
             its new terminals for it",
            &mut notes,
        ));
        deny.push(SANDBOX_NAMESPACE_DENY.to_string());
        notes.push(
            "clone with namespace flags answers EPERM instead of the profile's default action: \
             sandbox then runs without namespaces (the contained tier) and says so"
                .to_string(),
        );
    }
    let extended = profile.extended(&allow, &deny).map_err(|e| err(&e))?;
    Ok((extended, notes))
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
