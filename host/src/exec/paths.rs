//! The Landlock layer of one job: the request's path rules resolved against its profile
//! (what it may write, which ports it may reach), the default credential deny list, and a
//! private temporary directory; the ruleset itself is built (and cached) by
//! [`crate::landlock`].
//!
//! Defaults follow the profile's filter, so custom profiles get them too: a profile whose
//! filter lets `openat(O_WRONLY|O_CREAT)` through gets the working directory as its workspace,
//! one that refuses it (minimal, network) nothing writable at all; a profile whose filter
//! refuses TCP sockets also gets Landlock's TCP bind/connect denial as a second lock.

use super::request::{PathRules, Refusal};
use crate::landlock::{self, Field, Mode, Prepared, Spec, Tcp};
use crate::policy::{Action, NATIVE};
use crate::sandbox::Sandbox;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What the profile's filter allows, for the layer's defaults.
pub(super) struct Allows {
    /// Creating files.
    pub writes: bool,
    /// TCP sockets.
    pub tcp: bool,
}

/// What `sandbox`'s filter allows.
pub(super) fn allows(sandbox: &Sandbox) -> Allows {
    let Some(policy) = sandbox.profile_policy() else {
        // No filter (unrestricted): everything the filter could refuse is allowed.
        return Allows {
            writes: true,
            tcp: true,
        };
    };
    let decide = |name: &str, args: [u64; 6]| {
        NATIVE
            .syscall_number(name)
            .is_some_and(|nr| policy.decide(nr, &args) == Action::Allow)
    };
    let create = (libc::O_WRONLY | libc::O_CREAT) as u64;
    let at_cwd = libc::AT_FDCWD as u32 as u64;
    Allows {
        writes: decide("openat", [at_cwd, 0, create, 0o644, 0, 0]),
        tcp: decide(
            "socket",
            [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0],
        ),
    }
}

/// Whether `sandbox`'s filter lets a program create files (no filter: yes).
pub(crate) fn writes_allowed(sandbox: &Sandbox) -> bool {
    allows(sandbox).writes
}

/// Whether commands confined by the preload route under `sandbox` may write files: then what
/// they leave in a repository or an agent's control files is not put back (the route has no
/// check after the command), and `sandbox env` says so.
pub fn preload_layer_writes(sandbox: &Sandbox) -> bool {
    writes_allowed(sandbox)
}

/// The per-host directory under which each job gets its private TMPDIR. One directory for
/// all jobs of this host, so that the cached ruleset stays valid across jobs; each job gets a
/// fresh subdirectory, removed afterwards. The hosts' directories live in one private
/// directory per user, so finding those of hosts that are gone (removed here) lists only
/// that, not the whole shared temporary directory: a one-shot run pays this every time.
fn temp_root() -> std::io::Result<&'static Path> {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    if let Some(r) = ROOT.get() {
        return Ok(r);
    }
    let base = std::env::temp_dir();
    let uid = crate::sys::euid();
    let own = std::process::id();
    let parent = base.join(format!("sandbox-tmp-{uid}"));
    let dir = if private_dir(&parent, uid).is_ok() {
        remove_dead_hosts(&parent, "", own);
        parent.join(own.to_string())
    } else {
        // Another user holds the name: a directory beside it, named after this host.
        let prefix = format!("sandbox-tmp-{uid}-");
        remove_dead_hosts(&base, &prefix, own);
        base.join(format!("{prefix}{own}"))
    };
    private_dir(&dir, uid)?;
    Ok(ROOT.get_or_init(|| dir))
}

/// Removes the entries `<prefix><pid>` of `dir` whose host process is gone.
fn remove_dead_hosts(dir: &Path, prefix: &str, own: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != own && !Path::new(&format!("/proc/{pid}")).exists() {
            // Usually empty (every job removes its own directory): a single rmdir.
            if std::fs::remove_dir(e.path()).is_err() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// A job's layer: the prepared ruleset and its private temporary directory.
pub(crate) struct Layer {
    /// The ruleset (shared with other jobs of the same rules).
    pub prepared: Arc<Prepared>,
    /// The job's TMPDIR, removed on drop (none when the profile's filter refuses writes).
    pub tmp: Option<tempfile::TempDir>,
    /// The paths the job may write.
    pub writable: Vec<PathBuf>,
}

/// Where the user's other terminals are: out of a job's reach (docs/isolation.md).
pub(crate) const OTHER_TERMINALS: &str = "/dev/pts";

impl Layer {
    /// Whether the rules leave hiding the deny paths to the view's covers ([`Spec::covered`]):
    /// such rules grant no reading, and may only be applied by an init that mounted the
    /// covers and grants `/`.
    pub(crate) fn covered(&self) -> bool {
        self.prepared.status().covered
    }
}

/// The layer's rules for a command under `sandbox` run in `cwd`, with `temp` writable: the
/// workspace default and the TCP treatment follow the profile's filter, the deny list starts
/// from the credential list (`credentials`, resolved for the host's `HOME`). `covered`: the
/// job's view covers the deny paths ([`Spec::covered`]).
fn spec(
    rules: &PathRules,
    sandbox: &Sandbox,
    cwd: &Path,
    temp: Option<&Path>,
    covered: bool,
    credentials: &[PathBuf],
) -> Result<Spec, Refusal> {
    let allows = allows(sandbox);
    let profile = &sandbox.options().profile.name();
    let tcp = match (&rules.connect_ports, allows.tcp) {
        (Some(_), false) => {
            return Err(Refusal::new(
                "connect_ports",
                format!("profile {profile} allows no TCP at all; use a profile with network"),
            ))
        }
        (Some(ports), true) => Tcp::Ports(ports.clone()),
        (None, true) => Tcp::Any,
        (None, false) => Tcp::Deny,
    };
    let mut writable = writable_set(rules, &allows, cwd);
    writable.extend(temp.map(Path::to_path_buf));
    let mut deny_read = credentials.to_vec();
    deny_read.extend(rules.deny_read.iter().cloned());
    Ok(Spec {
        deny_read,
        writable,
        tcp,
        scoped: true,
        own_terminals_only: false,
        covered,
    })
}

/// The places a job may write, Landlock or not: the workspace (the working directory when
/// the profile's filter lets programs create files and no workspace is given) and the asked
/// writable paths. The constructed view (`view.rs`) binds exactly these writable.
pub(super) fn writable_set(rules: &PathRules, allows: &Allows, cwd: &Path) -> Vec<PathBuf> {
    let mut writable = Vec::new();
    match &rules.workspace {
        Some(w) => writable.push(w.clone()),
        None if allows.writes => writable.push(cwd.to_path_buf()),
        None => {}
    }
    writable.extend(rules.writable.iter().cloned());
    writable
}

/// The workspace a job run in `cwd` gets when the request names none: the working directory
/// for a profile whose filter lets a program create files, none for the others.
pub(crate) fn default_workspace<'a>(
    rules: &PathRules,
    sandbox: &Sandbox,
    cwd: &'a Path,
) -> Option<&'a Path> {
    (rules.workspace.is_none() && allows(sandbox).writes).then_some(cwd)
}

/// A Landlock error as the refusal of the field it names (`landlock` when none).
pub(crate) fn refusal(e: landlock::LandlockError) -> Refusal {
    Refusal::new(e.field().map_or("landlock", Field::as_str), e.to_string())
}

/// Resolves `rules` for a job under `sandbox` run in `cwd`; `None` when the layer is off.
/// `own_tmp`: whether the job needs a private TMPDIR on the host's file system (not when its
/// mount namespace gets a `/tmp` of its own, which the init grants every right). `covered`:
/// the job runs in the constructed view with covers over the deny paths (module `conceal`),
/// so no carve-out is planned ([`Spec::covered`]); the caller checks that the view it got has
/// them ([`Layer::covered`]). `credentials`: the credential list resolved for this job
/// (`credentials::deny_read`), which the caller resolves once for every layer.
pub(crate) fn layer(
    rules: &PathRules,
    sandbox: &Sandbox,
    cwd: &Path,
    own_tmp: bool,
    own_terminals_only: bool,
    covered: bool,
    credentials: &[PathBuf],
) -> Result<Option<Layer>, Refusal> {
    // With Landlock or without, the constructed view binds the same places writable.
    preload_outside(rules, sandbox, &writable_set(rules, &allows(sandbox), cwd))?;
    if rules.mode == Mode::Off {
        return Ok(None);
    }
    // A private TMPDIR only where the filter lets the program create files: under a profile
    // that refuses every creation (minimal, network) it could not use one, and creating and
    // removing the directories is most of what this layer costs a one-shot run. A job with a
    // private `/tmp` gets neither the directory nor a rule for the host's: it has TMPDIR=/tmp,
    // and a warm host would otherwise make and remove a directory on the host's file system
    // for every job (a journalled `mkdir` and `rmdir`, milliseconds of wall time on a busy
    // disk), unused.
    let root = if own_tmp && allows(sandbox).writes {
        Some(
            temp_root()
                .map_err(|e| Refusal::new("landlock", format!("temporary directory: {e}")))?,
        )
    } else {
        None
    };
    let mut spec = spec(rules, sandbox, cwd, root, covered, credentials)?;
    // Without namespaces (no devpts of its own), a job's terminals are its own (a
    // descriptor) and those it creates (module `emulate`); the user's others are neither
    // written (no device rule) nor read (carved out of the read rule: a rule for each entry
    // of /dev, which a job with namespaces does not need).
    if own_terminals_only {
        spec.own_terminals_only = true;
        spec.deny_read.push(PathBuf::from(OTHER_TERMINALS));
    }
    let tmp = root
        .map(|root| {
            tempfile::Builder::new()
                .prefix("job-")
                .tempdir_in(root)
                .map_err(|e| Refusal::new("landlock", format!("temporary directory: {e}")))
        })
        .transpose()?;
    let max_abi = landlock::try_max_abi_from_env().map_err(refusal)?;
    match landlock::prepare_cached(&spec, rules.mode, max_abi).map_err(refusal)? {
        Some(prepared) => Ok(Some(Layer {
            prepared,
            tmp,
            writable: spec.writable,
        })),
        None => Ok(None),
    }
}

/// Refuses a job whose writable places hold the preload library its program loads (a custom
/// profile whose outer filter is not exact): the job could replace the library that later
/// jobs of the same sandbox load. The library is extracted before the job's places are known
/// (once per sandbox), so it is not moved here; the refusal names the field to narrow.
fn preload_outside(
    rules: &PathRules,
    sandbox: &Sandbox,
    writable: &[PathBuf],
) -> Result<(), Refusal> {
    let Some(lib) = sandbox.loaded_preload() else {
        return Ok(());
    };
    let Some(place) = crate::extract::writable_container(lib, writable) else {
        return Ok(());
    };
    let field = if rules.writable.iter().any(|w| w == place) {
        "writable_paths"
    } else {
        "workspace"
    };
    Err(Refusal::new(
        field,
        format!(
            "{} holds the preload library {} that this profile's jobs load: a job could replace \
             it; give a place that does not hold it, or set XDG_RUNTIME_DIR to a private \
             directory outside it",
            crate::escape::path(place),
            crate::escape::path(lib)
        ),
    ))
}

/// The layer for the preload route (`sandbox env`): what `libsandbox.so` reads from
/// `SANDBOX_LANDLOCK`, and the temporary directory it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreloadLayer {
    /// `SANDBOX_LANDLOCK`'s value (format in docs/paths.md).
    pub value: String,
    /// The warning of a broad workspace the caller allowed (`--allow-broad-workspace`).
    pub warning: Option<String>,
    /// A private directory the commands may write, for `TMPDIR`: one per user, kept across
    /// commands (nobody is there to remove it after each one).
    pub tmpdir: PathBuf,
    /// Every place the commands may write (workspace, `--allow-write` paths, `tmpdir`): the
    /// library they load must lie outside all of them.
    pub writable: Vec<PathBuf>,
}

impl PreloadLayer {
    /// The request field that made `place` writable, for a refusal worded with its flag:
    /// `workspace` for the workspace (given or the working directory), `writable_paths` for
    /// an `--allow-write` path, `landlock` for the private TMPDIR.
    pub fn field_of(&self, rules: &PathRules, place: &Path) -> &'static str {
        if rules.writable.iter().any(|w| w == place) {
            "writable_paths"
        } else if place == self.tmpdir {
            "landlock"
        } else {
            "workspace"
        }
    }
}

/// Resolves `rules` for commands started with the preload route from `cwd`; `None` when the
/// layer is off. The rules are fixed now, when the variables are printed: entries created
/// later beside a denied path stay unreadable (docs/paths.md).
pub fn preload_layer(
    rules: &PathRules,
    sandbox: &Sandbox,
    cwd: &Path,
) -> Result<Option<PreloadLayer>, Refusal> {
    if rules.mode == Mode::Off {
        return Ok(None);
    }
    let warning = super::workspace::check(
        rules,
        default_workspace(rules, sandbox, cwd),
        super::request::Audience::Cli,
    )?;
    let tmpdir = env_temp_dir()
        .map_err(|e| Refusal::new("landlock", format!("temporary directory: {e}")))?;
    let credentials = crate::credentials::deny_read(&crate::credentials::Context::current());
    let spec = spec(rules, sandbox, cwd, Some(&tmpdir), false, &credentials)?;
    let max_abi = landlock::try_max_abi_from_env().map_err(refusal)?;
    let value = landlock::preload_value(&spec, rules.mode, max_abi).map_err(refusal)?;
    Ok(Some(PreloadLayer {
        value,
        tmpdir,
        warning,
        writable: spec.writable,
    }))
}

/// `tmp` in the caller's state directory (module `state_dir`), mode 0700: not in the shared
/// temporary directory, where another user could take the name first and deny the route.
fn env_temp_dir() -> Result<PathBuf, String> {
    crate::state_dir::sub("tmp")
}

/// Creates `dir` with mode 0700, or accepts it when it already is a directory of `uid` that
/// nobody else may enter; anything else is refused.
pub(crate) fn private_dir(dir: &Path, uid: u32) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} exists and is not a private directory of ours",
                dir.display()
            ),
        ));
    }
    Ok(())
}
