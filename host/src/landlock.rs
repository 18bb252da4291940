//! The Landlock layer: which files a confined command may read and write, which TCP ports it
//! may connect to, and whether it may signal or reach processes outside its own domain.
//!
//! Seccomp decides which syscalls run, not which files or processes they touch; Landlock does
//! the latter, unprivileged, and is inherited by every descendant. This module turns a [`Spec`]
//! into a Landlock ruleset with the `landlock` crate and leaves applying it to the caller: the
//! exec spawner's child passes [`Prepared::raw_fd`] to `landlock_restrict_self`, and other
//! callers use [`Prepared::restrict_self`].
//!
//! Landlock only grants, so "read everything except the deny list" is built as a carve-out:
//! every sibling of a denied path, at every level from `/` down to the denied path's parent,
//! gets read rights; the ancestors themselves get none (a right on a directory is inherited by
//! everything beneath it, including the denied path). See docs/paths.md for the consequences.
//! Where the constructed view hides the deny paths itself ([`Spec::covered`]), no carve-out is
//! planned: the view's init grants reading `/` over the covers.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ::landlock::{
    make_bitflags, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    NetPort, PathBeneath, RestrictSelf, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr,
    RulesetStatus, Scope, ABI,
};
use serde::{Deserialize, Serialize};

/// Environment variable that lowers the Landlock ABI used (for testing degraded kernels).
pub const MAX_ABI_VAR: &str = "SANDBOX_LANDLOCK_MAX_ABI";

/// A Landlock feature the layer uses, with the ABI and Linux version that brought it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// The Landlock ABI that has it.
    pub abi: u8,
    /// The first Linux release with that ABI.
    pub linux: &'static str,
    /// What it protects, in words.
    pub what: &'static str,
}

/// What each feature needs (docs/paths.md has the same table; `sandbox check` prints what the
/// running kernel lacks).
pub const FEATURES: &[Feature] = &[
    Feature {
        abi: 1,
        linux: "5.13",
        what: "file read and write rules",
    },
    Feature {
        abi: 2,
        linux: "5.19",
        what: "renames and links inside a writable tree",
    },
    Feature {
        abi: 3,
        linux: "6.2",
        what: "truncation outside the writable set",
    },
    Feature {
        abi: 4,
        linux: "6.7",
        what: "TCP bind and connect rules",
    },
    Feature {
        abi: 5,
        linux: "6.10",
        what: "device ioctl restriction",
    },
    Feature {
        abi: 6,
        linux: "6.12",
        what: "signal and abstract unix socket scoping",
    },
];

/// Environment variable through which the preload route receives [`preload_value`].
pub const ENV_VAR: &str = "SANDBOX_LANDLOCK";

/// How strictly the layer must be enforced (shared with the namespace layer).
pub use crate::layer_mode::LayerMode as Mode;

/// What TCP the confined program may do (Landlock ABI 4; UDP and other protocols are not
/// covered by Landlock and stay with the seccomp profile).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tcp {
    /// No TCP bind and no TCP connect.
    Deny,
    /// Connect only to these ports; bind denied.
    Ports(Vec<u16>),
    /// TCP not restricted by this layer.
    Any,
}

/// What the ruleset protects. The caller assembles it: `writable` already holds the
/// workspace, the private TMPDIR and any extra writable paths; `deny_read` already holds
/// the credential list ([`crate::credentials::deny_read`]) plus user additions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Spec {
    /// Paths that must not be read (absolute; they need not exist).
    pub deny_read: Vec<PathBuf>,
    /// The only paths beneath which anything may be written (absolute, existing).
    pub writable: Vec<PathBuf>,
    /// TCP restriction.
    pub tcp: Tcp,
    /// Whether signals and abstract unix sockets are confined to the sandboxed domain.
    pub scoped: bool,
    /// Whether the host's `/dev/pts` is left out (the user's other terminals): the engine's
    /// jobs hold their own terminal as a descriptor and get new ones through the supervisor
    /// (`TIOCGPTPEER`, module `exec::emulate`) or a devpts of their own; the preload route's
    /// commands run in the user's terminal and keep the rule (false, also when absent).
    #[serde(default)]
    pub own_terminals_only: bool,
    /// The deny paths are hidden by the place the rules are applied in, not by the rules: the
    /// constructed view binds a mode-000 cover over each one that exists (`exec/conceal.rs`)
    /// and its init grants reading `/` once they are mounted. The plan then makes no carve-out
    /// (no listing of the deny paths' ancestors, no rule beside them) and grants no reading at
    /// all: rules planned so, applied anywhere else, let a program read only its writable set
    /// and devices, never the deny paths. `fs-read-deny` is still reported (the covers
    /// enforce it), with [`Status::covered`] set.
    #[serde(default)]
    pub covered: bool,
}

impl Spec {
    /// Whether the plan leaves the deny paths to the view's covers: asked for, and there are
    /// deny paths (without any, nothing is covered and the rules grant `/` themselves).
    fn covers_deny_paths(&self) -> bool {
        self.covered && !self.deny_read.is_empty()
    }
}

/// Which request field a validation error is about, so callers can name it to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Extra writable paths.
    WritablePaths,
    /// Paths that must not be read.
    DenyRead,
    /// The working directory that is made writable.
    Workspace,
}

impl Field {
    /// The field's name as it appears in requests.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::WritablePaths => "writable_paths",
            Field::DenyRead => "deny_read",
            Field::Workspace => "workspace",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of the Landlock layer; each names the field or feature at fault.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// A path is not absolute.
    #[error("{field}: {path:?} is not an absolute path; give the full path from /")]
    NotAbsolute {
        /// The field the path came from.
        field: Field,
        /// The offending path.
        path: PathBuf,
    },
    /// A path contains a NUL byte or a newline.
    #[error("{field}: {path:?} contains a NUL byte or a newline; rename it or leave it out")]
    BadCharacter {
        /// The field the path came from.
        field: Field,
        /// The offending path.
        path: PathBuf,
    },
    /// A writable path does not exist.
    #[error("{field}: {path} does not exist; create it first or leave it out")]
    Missing {
        /// The field the path came from.
        field: Field,
        /// The offending path.
        path: PathBuf,
    },
    /// A path could not be resolved or opened.
    #[error("{field}: cannot open {path}: {source}")]
    Open {
        /// The field the path came from.
        field: Field,
        /// The offending path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Reading around a deny path needs `/` listed (the carve-out), which a layer around this
    /// process refuses: the Landlock domain of a sandbox this one runs in, which does not deny
    /// the path itself. Without the listing nothing could be granted, so the run is refused
    /// rather than started unable to exec anything.
    #[error(
        "{field}: reading around {path} cannot be granted here: / cannot be listed (a sandbox \
         around this one refuses it, and does not deny {path} itself); leave the path out, or \
         deny it in the sandbox around this one too"
    )]
    Unlistable {
        /// The field the path came from.
        field: Field,
        /// A deny path that needs the carve-out.
        path: PathBuf,
    },
    /// [`MAX_ABI_VAR`] holds something that is not a number from 0 to 255.
    #[error("{MAX_ABI_VAR}={0:?} is not a Landlock ABI number (0-255)")]
    InvalidMaxAbi(String),
    /// Mode [`Mode::Required`] and the kernel (or the ABI limit) lacks asked features.
    #[error("{}", unavailable_message(.missing, *.kernel, *.used))]
    Unavailable {
        /// The missing features in words, e.g. "Landlock ABI 6 (signal scoping)".
        missing: Vec<String>,
        /// The kernel's Landlock ABI (0: none).
        kernel: u8,
        /// The ABI that would have been used (lower than `kernel` when limited).
        used: u8,
    },
    /// The `landlock` crate refused to build the ruleset.
    #[error("cannot build the Landlock ruleset: {0}")]
    Ruleset(#[source] ::landlock::RulesetError),
    /// The ruleset could not be applied to the calling thread.
    #[error("cannot apply the Landlock ruleset: {0}")]
    Restrict(String),
}

impl LandlockError {
    /// The request field at fault, when the error is about one.
    pub fn field(&self) -> Option<Field> {
        match self {
            LandlockError::NotAbsolute { field, .. }
            | LandlockError::BadCharacter { field, .. }
            | LandlockError::Missing { field, .. }
            | LandlockError::Open { field, .. }
            | LandlockError::Unlistable { field, .. } => Some(*field),
            _ => None,
        }
    }
}

fn unavailable_message(missing: &[String], kernel: u8, used: u8) -> String {
    let verb = if missing.len() == 1 { "is" } else { "are" };
    let kernel = if kernel == 0 {
        "the kernel has no Landlock".to_owned()
    } else if used < kernel {
        format!("kernel has ABI {kernel}, limited to ABI {used}")
    } else {
        format!("kernel has ABI {kernel}")
    };
    format!(
        "{} {verb} not available: {kernel}; run with Landlock mode preferred to go without",
        missing.join(", ")
    )
}

/// The Landlock ABI of the running kernel (`None`: no Landlock), for `sandbox check`.
pub fn abi() -> Option<u8> {
    static ABI_CACHE: OnceLock<Option<u8>> = OnceLock::new();
    *ABI_CACHE.get_or_init(|| {
        // With no flag and no_new_privs off, `apply` only probes the kernel: it makes no
        // restriction and reports the status the crate itself works from.
        let status = RestrictSelf::default().no_new_privs(false).apply().ok()?;
        match status.landlock {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => {
                let v = kernel_abi.unwrap_or(effective_abi as i32);
                Some(u8::try_from(v).unwrap_or(u8::MAX))
            }
            _ => None,
        }
    })
}

/// The ABI limit from [`MAX_ABI_VAR`]; unset, empty or not a number gives `None` (no limit,
/// so a typo never weakens the layer). Use [`try_max_abi_from_env`] to reject bad values.
pub fn max_abi_from_env() -> Option<u8> {
    try_max_abi_from_env().ok().flatten()
}

/// The ABI limit from [`MAX_ABI_VAR`], with an error for a value that is not a number.
pub fn try_max_abi_from_env() -> Result<Option<u8>, LandlockError> {
    match std::env::var_os(MAX_ABI_VAR) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => {
            let s = v.to_string_lossy();
            s.trim()
                .parse::<u8>()
                .map(Some)
                .map_err(|_| LandlockError::InvalidMaxAbi(s.into_owned()))
        }
    }
}

/// The credential list (`profiles/credentials.toml`, through [`crate::credentials::deny_read`])
/// resolved with `home` as the home directory, and this process's runtime directory and uid.
pub fn default_deny_read(home: &Path) -> Vec<PathBuf> {
    crate::credentials::deny_read(&crate::credentials::Context {
        home: Some(home.to_path_buf()),
        ..crate::credentials::Context::current()
    })
}

fn check_text(field: Field, path: &Path) -> Result<(), LandlockError> {
    if !path.is_absolute() {
        return Err(LandlockError::NotAbsolute {
            field,
            path: path.to_owned(),
        });
    }
    if path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| *b == 0 || *b == b'\n')
    {
        return Err(LandlockError::BadCharacter {
            field,
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Checks one writable path (absolute, no NUL or newline, existing); `field` says which
/// request field it came from (the caller checks the workspace with [`Field::Workspace`]).
pub fn validate_writable(field: Field, path: &Path) -> Result<(), LandlockError> {
    check_text(field, path)?;
    match fs::metadata(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(LandlockError::Missing {
            field,
            path: path.to_owned(),
        }),
        Err(source) => Err(LandlockError::Open {
            field,
            path: path.to_owned(),
            source,
        }),
    }
}

/// Checks a spec without building anything: writable paths absolute, existing, free of NUL
/// and newline; deny paths absolute and free of NUL and newline (they need not exist).
pub fn validate(spec: &Spec) -> Result<(), LandlockError> {
    for p in &spec.writable {
        validate_writable(Field::WritablePaths, p)?;
    }
    for p in &spec.deny_read {
        check_text(Field::DenyRead, p)?;
    }
    Ok(())
}

/// What the layer enforced for one prepared ruleset, for results and `sandbox run -v`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The kernel's ABI and the one used.
    pub abi: AbiStatus,
    /// The mode asked for.
    pub mode: Mode,
    /// Protections enforced, among "fs-read-deny", "fs-write", "tcp", "scope-signal",
    /// "scope-abstract-unix".
    pub enforced: Vec<String>,
    /// What was asked but is not enforced, in words (empty in [`Mode::Required`]).
    pub missing: Vec<String>,
    /// Deny paths that did not exist when the ruleset was built (nothing to protect).
    /// Shared, not copied: every result of a session carries its status, and the default deny
    /// list's absent paths are fifty-odd on a machine without those tools (copying them into
    /// each result, the host's CPU per command was 60-66 µs; shared, 58-59; docs/benchmarks.md).
    pub deny_read_absent: std::sync::Arc<[PathBuf]>,
    /// Whether `fs-read-deny` is enforced by the constructed view's covers over the deny
    /// paths rather than by a carve-out in the rules ([`Spec::covered`]). Left out of JSON
    /// when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub covered: bool,
}

impl Status {
    /// The enforced protections as `sandbox run -v` and `sandbox check` print them: `nothing`
    /// when empty, and `fs-read-deny` followed by `(by the view's covers)` when the view, not
    /// a carve-out, hides the deny paths.
    pub fn enforced_text(&self) -> String {
        if self.enforced.is_empty() {
            return "nothing".to_string();
        }
        self.enforced
            .iter()
            .map(|e| match e.as_str() {
                "fs-read-deny" if self.covered => "fs-read-deny (by the view's covers)",
                e => e,
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The kernel's Landlock ABI and the one the ruleset was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbiStatus {
    /// The running kernel's ABI (0: no Landlock).
    pub kernel: u8,
    /// The ABI used: the kernel's, or lower when limited by `max_abi`.
    pub used: u8,
}

/// A planned ruleset (paths opened, rules decided), ready to be applied to any number of
/// children. The kernel's ruleset is created from the rules when it is first needed: a
/// process with mounts of its own rebuilds it from [`Prepared::raw_rules`] instead, so a run
/// in namespaces never needs the host's.
#[derive(Debug)]
pub struct Prepared {
    /// The kernel's ruleset, once built (never without Landlock: `raw` is `None` then).
    kernel: OnceLock<Kernel>,
    /// How strictly the kernel must honour the rules (`Required`: no silent downgrade).
    mode: Mode,
    status: Status,
    stamps: Vec<Stamp>,
    /// The same rules in the kernel's terms, to rebuild the ruleset with more rules.
    raw: Option<Arc<RawRules>>,
}

/// The kernel's ruleset of a [`Prepared`].
#[derive(Debug)]
struct Kernel {
    ruleset: RulesetCreated,
    /// The same ruleset's fd, kept for [`Prepared::raw_fd`] (the crate does not expose it).
    fd: Option<OwnedFd>,
}

/// A ruleset's attributes and rules in the kernel's terms, with the descriptors the rules
/// name kept open: a process that has mounts of its own (a new `/proc`, a private `/tmp`)
/// rebuilds the ruleset from them with raw system calls and adds rules for those mounts.
#[derive(Debug)]
pub struct RawRules {
    /// `struct landlock_ruleset_attr`: handled file-system and network accesses, scopes.
    pub attr: [u64; 3],
    /// Its size for `landlock_create_ruleset`.
    pub attr_size: usize,
    /// Path-beneath rules: a descriptor and the accesses granted beneath it.
    pub paths: Vec<(RawFd, u64)>,
    /// TCP port rules: port and accesses.
    pub ports: Vec<(u64, u64)>,
    /// The read rights of a directory rule (for a new `/proc`).
    pub read: u64,
    /// Every file-system right of the ABI (for a private `/tmp`).
    pub all: u64,
    /// The device rights (for a fresh `/dev/pts`).
    pub dev: u64,
    /// The descriptors of `paths`, in the same order (they keep them open).
    fds: Vec<OwnedFd>,
}

impl Prepared {
    /// The rules this ruleset was built from, in the kernel's terms (`None` without Landlock).
    pub fn raw_rules(&self) -> Option<Arc<RawRules>> {
        self.raw.clone()
    }

    /// The kernel's ruleset, built on first use; `None` without Landlock.
    fn kernel(&self) -> Result<Option<&Kernel>, LandlockError> {
        let Some(raw) = &self.raw else {
            return Ok(None);
        };
        if let Some(k) = self.kernel.get() {
            return Ok(Some(k));
        }
        let ruleset = build(self.mode, raw).map_err(LandlockError::Ruleset)?;
        let fd = ruleset_fd(&ruleset)?;
        // Another thread may have built it meanwhile: either copy does.
        let _ = self.kernel.set(Kernel { ruleset, fd });
        Ok(self.kernel.get())
    }

    /// The ruleset fd (close-on-exec) for `landlock_restrict_self(fd, 0)` in a child after
    /// `PR_SET_NO_NEW_PRIVS`, the kernel's ruleset built on the first call. It is -1 only when
    /// Landlock is unavailable in [`Mode::Preferred`] (then `status().enforced` is empty):
    /// skip the call. An error means the kernel refused the rules: nothing may run.
    pub fn raw_fd(&self) -> Result<RawFd, LandlockError> {
        Ok(self
            .kernel()?
            .and_then(|k| k.fd.as_ref())
            .map_or(-1, AsRawFd::as_raw_fd))
    }

    /// What this ruleset enforces.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Applies the ruleset to the calling thread (and everything it later runs), after
    /// setting `PR_SET_NO_NEW_PRIVS`. The prepared ruleset stays usable: this works on a
    /// duplicate of the fd. Landlock restricts only the calling thread: call it in a
    /// single-threaded child (e.g. `pre_exec`) or before starting threads.
    pub fn restrict_self(&self) -> Result<Status, LandlockError> {
        let Some(kernel) = self.kernel()? else {
            return Ok(self.status.clone());
        };
        let copy = kernel
            .ruleset
            .try_clone()
            .map_err(|e| LandlockError::Restrict(e.to_string()))?;
        let result = copy
            .restrict_self()
            .map_err(|e| LandlockError::Restrict(e.to_string()))?;
        if result.ruleset != RulesetStatus::FullyEnforced {
            return Err(LandlockError::Restrict(format!(
                "the kernel enforced the ruleset only as {:?}",
                result.ruleset
            )));
        }
        Ok(self.status.clone())
    }

    /// Whether the paths the ruleset was built from are unchanged: same directories (same
    /// ctime: no entry added, removed or renamed, see [`Stamp`]) along the carve-out, same
    /// writable inodes, absent deny paths still absent.
    fn is_current(&self) -> bool {
        self.stamps.iter().all(Stamp::is_current)
    }
}

/// One fact the ruleset depends on, rechecked before a cached ruleset is reused.
///
/// Nothing in a stamp can be set back by the programs the ruleset confines: a directory's
/// mtime (and atime) can be set to any value by its owner (`touch -d`, `utimensat`), so a
/// request could add an entry beside a carved path and restore the mtime, and the next
/// request would reuse a ruleset that never saw the entry. The change time (`ctime`) is set
/// by the kernel to the current time on every change, `utimensat` included, and only a
/// clock change (`CAP_SYS_TIME`) could make it repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    path: PathBuf,
    kind: StampKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum StampKind {
    /// A carved ancestor: its entries must not have changed (device, inode, ctime seconds
    /// and nanoseconds; `None`: it did not exist).
    Dir(Option<(u64, u64, i64, i64)>),
    /// A directory changed within [`UNSETTLED`] of its stamp: a later change could get the
    /// same ctime (a coarse clock tick, a file system that keeps whole seconds), so the
    /// ruleset built from it is never reused.
    Unsettled,
    /// A writable path: the same inode (its contents change all the time).
    Inode(Option<(u64, u64)>),
}

/// How old a directory's ctime must be for a change after the stamp to be sure to give
/// another one: more than the coarsest timestamp granularity of a native Linux file system
/// (one second: ext4 with 128-byte inodes) plus one clock tick.
const UNSETTLED: std::time::Duration = std::time::Duration::from_secs(2);

impl Stamp {
    fn dir(path: &Path) -> Stamp {
        // The time first: a change after this instant gets a ctime at or after it.
        let now = std::time::SystemTime::now();
        let m = fs::metadata(path).ok();
        let kind = match m {
            Some(m) if !settled(m.ctime(), m.ctime_nsec(), now) => StampKind::Unsettled,
            m => StampKind::Dir(m.map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))),
        };
        Stamp {
            path: path.to_owned(),
            kind,
        }
    }

    fn inode(path: &Path) -> Stamp {
        let m = fs::metadata(path).ok();
        Stamp {
            path: path.to_owned(),
            kind: StampKind::Inode(m.map(|m| (m.dev(), m.ino()))),
        }
    }

    fn is_current(&self) -> bool {
        let now = match self.kind {
            StampKind::Dir(_) => Stamp::dir(&self.path),
            StampKind::Unsettled => return false,
            StampKind::Inode(_) => Stamp::inode(&self.path),
        };
        now == *self
    }
}

/// Whether a ctime of `sec`.`nsec` is older than `now` by more than [`UNSETTLED`]. A ctime
/// in the future (a clock set back) is not.
fn settled(sec: i64, nsec: i64, now: std::time::SystemTime) -> bool {
    let Ok(since) = now.duration_since(std::time::UNIX_EPOCH) else {
        return false;
    };
    let ctime = std::time::Duration::new(sec.max(0) as u64, nsec.clamp(0, 999_999_999) as u32);
    sec >= 0 && since.checked_sub(ctime).is_some_and(|age| age > UNSETTLED)
}

/// A path with its `O_PATH` fd, opened once while planning so the rule binds the inode that
/// was checked (not whatever the path names a moment later).
struct Entry {
    path: PathBuf,
    fd: OwnedFd,
    is_dir: bool,
}

/// The rules of a spec, before they become a ruleset or text.
struct Plan {
    read: Vec<Entry>,
    write: Vec<(Entry, bool)>,
    dev: Vec<Entry>,
    absent: Vec<PathBuf>,
    stamps: Vec<Stamp>,
}

/// Devices every program may read, write and ioctl (file rules); the constructed view binds
/// the same nodes into its fresh `/dev` (`exec/view.rs`).
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Pseudo-terminals: a beneath rule with file rights only.
const PTS: &str = "/dev/pts";

fn open_path(path: &Path, follow: bool) -> io::Result<(OwnedFd, fs::Metadata)> {
    let fd = crate::sys::open_path(path, follow)?;
    let file = fs::File::from(fd);
    let meta = file.metadata()?;
    Ok((file.into(), meta))
}

/// `path` opened with `O_PATH | O_NOFOLLOW`, without a stat.
fn open_nofollow(path: &Path) -> io::Result<OwnedFd> {
    crate::sys::open_path(path, false)
}

/// `path` opened with `O_PATH`, following symlinks, without a stat.
fn open_follow(path: &Path) -> io::Result<OwnedFd> {
    crate::sys::open_path(path, true)
}

/// Whether a deny path cannot be reached by this process: it does not exist, or a directory on
/// the way refuses this user the search (`EACCES`: another user's private directory, such as
/// root's `/.local` when a service account's `HOME` is `/`). The job runs with the same
/// credentials and no more rights, so it cannot reach the path either; it is treated as absent
/// (watched like one) instead of failing every run.
fn unreachable_here(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
    )
}

/// Whether reading `path` is refused to this process although its mode allows it: a Landlock
/// domain (or another security module) around this process refuses it, and every job this
/// process starts inherits that refusal. Only `EACCES` on the open counts; any other failure
/// leaves the path to the carve-out.
fn refused_around(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    crate::sys::may_read(path)
        && fs::OpenOptions::new()
            .read(true)
            // Credentials are files and directories; a FIFO or device planted there must not
            // block the open or become a controlling terminal.
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .is_err_and(|e| e.raw_os_error() == Some(libc::EACCES))
}

/// The nearest existing directory above `path` (its parent, or further up).
fn nearest_dir(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|a| fs::metadata(a).is_ok_and(|m| m.is_dir()))
        .map(Path::to_path_buf)
}

fn has_newline(path: &Path) -> bool {
    path.as_os_str().as_bytes().contains(&b'\n')
}

/// How many deny paths must share a parent directory before it is listed once instead of
/// stat'ing each of them (the default list has 11 directly in `$HOME`; a listing costs about
/// as much as four stats).
const LIST_FROM: usize = 4;

/// One entry of a listing: its name and type.
type DirEntry = (std::ffi::OsString, fs::FileType);

/// Directory listings taken while planning, each once and each after its stamp: the deny
/// paths' common parent (`$HOME`) is also a carved ancestor, so one listing serves both, and
/// the deny paths found absent are exactly those the carve-out does not see.
#[derive(Default)]
struct Listings {
    /// Each directory with its entries (`None`: it could not be listed).
    dirs: Vec<(PathBuf, Option<Vec<DirEntry>>)>,
    /// The watched directories' stamps, one per directory.
    stamps: Vec<Stamp>,
}

impl Listings {
    /// Stamps `dir` (once).
    fn stamp(&mut self, dir: &Path) {
        if !self.stamps.iter().any(|s| s.path == dir) {
            self.stamps.push(Stamp::dir(dir));
        }
    }

    /// The entries of `dir` (name and type; `None`: it cannot be listed). The stamp comes
    /// first, so that a change made after it is seen when a cached ruleset is reused.
    fn list(&mut self, dir: &Path) -> Option<&[DirEntry]> {
        let i = match self.dirs.iter().position(|(d, _)| d == dir) {
            Some(i) => i,
            None => {
                self.stamp(dir);
                let entries = fs::read_dir(dir).ok().map(|rd| {
                    rd.flatten()
                        .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
                        .collect()
                });
                self.dirs.push((dir.to_path_buf(), entries));
                self.dirs.len() - 1
            }
        };
        self.dirs[i].1.as_deref()
    }

    /// Whether `dir` was listed successfully.
    fn listed(&self, dir: &Path) -> bool {
        self.dirs.iter().any(|(d, e)| d == dir && e.is_some())
    }

    /// For a deny path beneath a listed directory whose next component is not there: that
    /// directory (the nearest existing one above the path, which does not exist). `None`
    /// when no listing says so (the path is looked up).
    fn absent_below(&self, path: &Path) -> Option<PathBuf> {
        self.dirs.iter().find_map(|(dir, entries)| {
            let rest = path.strip_prefix(dir).ok()?;
            // Only a plain name can be looked up in a listing (not `..`).
            let Some(std::path::Component::Normal(first)) = rest.components().next() else {
                return None;
            };
            let entries = entries.as_ref()?;
            (!entries.iter().any(|(n, _)| n == first)).then(|| dir.clone())
        })
    }
}

fn plan(spec: &Spec) -> Result<Plan, LandlockError> {
    // `validate` without its stat of each writable path: the canonicalisation below fails
    // the same way (`Missing` or `Open`, same field and path) when one does not exist.
    for p in &spec.writable {
        check_text(Field::WritablePaths, p)?;
    }
    for p in &spec.deny_read {
        check_text(Field::DenyRead, p)?;
    }
    let mut stamps = Vec::new();
    // Directories whose entries the ruleset depends on: the carved ancestors and, for each
    // deny path, the nearest existing directory above it (a deny path that appears, or is
    // replaced, changes that directory's mtime). One stat each on reuse.
    let mut watched = BTreeSet::new();

    // Deny paths resolve to the inode that holds the secret: a symlinked `.ssh` is carved at
    // its target. Paths that do not exist have nothing to protect.
    let mut absent = Vec::new();
    let mut denied = BTreeSet::new();
    // Deny paths mostly share a parent ($HOME) and mostly do not exist: one lookup of the
    // nearest directory per parent, and a plain stat before resolving symlinks.
    let mut nearest: Vec<(Option<&Path>, Option<PathBuf>)> = Vec::new();
    let mut listings = Listings::default();
    let mut parents: Vec<(&Path, usize)> = Vec::new();
    for d in spec.deny_read.iter().filter_map(|p| p.parent()) {
        match parents.iter_mut().find(|(q, _)| *q == d) {
            Some((_, n)) => *n += 1,
            None => parents.push((d, 1)),
        }
    }
    for (dir, _) in parents.iter().filter(|(_, n)| *n >= LIST_FROM) {
        listings.list(dir);
    }
    for p in &spec.deny_read {
        let parent = p.parent();
        if let Some(near) = listings.absent_below(p) {
            watched.insert(near);
            absent.push(p.clone());
            continue;
        }
        let near = match nearest.iter().find(|(parent, _)| *parent == p.parent()) {
            Some((_, n)) => n.clone(),
            // A parent that could be listed is a directory.
            None if parent.is_some_and(|d| listings.listed(d)) => parent.map(Path::to_path_buf),
            None => {
                let n = nearest_dir(p);
                nearest.push((p.parent(), n.clone()));
                n
            }
        };
        watched.extend(near);
        let resolved = match fs::metadata(p) {
            Err(e) if unreachable_here(&e) => Err(e),
            // Covered: whether it exists is all the status needs; nothing is carved around it.
            Ok(_) if spec.covers_deny_paths() => continue,
            // Refused already by a layer around this process (the Landlock domain of a
            // sandbox this one runs in), which the job inherits and cannot leave: carving
            // around it again would need listings that layer refuses (`/`, `$HOME`), and
            // without them nothing at all would be granted.
            Ok(_) if refused_around(p) => continue,
            _ => fs::canonicalize(p),
        };
        match resolved {
            Ok(c) => {
                denied.insert(c);
            }
            Err(e) if unreachable_here(&e) => {
                absent.push(p.clone());
            }
            Err(source) => {
                return Err(LandlockError::Open {
                    field: Field::DenyRead,
                    path: p.clone(),
                    source,
                })
            }
        }
    }
    // A path beneath another denied path is covered by it; carving inside it would grant
    // its siblings, which are secrets too.
    let outer: BTreeSet<PathBuf> = denied
        .iter()
        .filter(|d| !d.ancestors().skip(1).any(|a| denied.contains(a)))
        .cloned()
        .collect();
    let ancestors: BTreeSet<PathBuf> = outer
        .iter()
        .flat_map(|d| d.ancestors().skip(1).map(Path::to_path_buf))
        .collect();

    let mut read = Vec::new();
    // Covered: no reading is granted here (the view's init grants `/` over the covers).
    if outer.is_empty() && !spec.covers_deny_paths() {
        let (fd, _) = open_path(Path::new("/"), true).map_err(|source| LandlockError::Open {
            field: Field::DenyRead,
            path: "/".into(),
            source,
        })?;
        read.push(Entry {
            path: "/".into(),
            fd,
            is_dir: true,
        });
    }
    watched.extend(ancestors.iter().cloned());
    for d in &watched {
        listings.stamp(d);
    }
    // Entries are matched by their bytes: every path here is canonical (or a canonical
    // directory joined with a plain name), so that is path equality without parsing components.
    let skip: std::collections::HashSet<&std::ffi::OsStr> = outer
        .iter()
        .chain(&ancestors)
        .map(|p| p.as_os_str())
        .collect();
    for dir in &ancestors {
        // A directory that cannot be listed gets no grants: its entries stay unreadable.
        let Some(entries) = listings.list(dir) else {
            // `/` refused by a layer around this process: nothing outside the writable places
            // would be granted, not even the program's own file. Said instead.
            if dir == Path::new("/") && refused_around(dir) {
                let path = outer.iter().next().cloned().unwrap_or_default();
                return Err(LandlockError::Unlistable {
                    field: Field::DenyRead,
                    path,
                });
            }
            continue;
        };
        for (name, kind) in entries {
            let path = dir.join(name);
            if skip.contains(path.as_os_str()) || has_newline(&path) {
                continue;
            }
            // A symlink beside a secret may point into it; its target is granted (or not)
            // where it really lives.
            if kind.is_symlink() {
                continue;
            }
            // The entry's type from the directory listing spares a stat per entry. Should it
            // be replaced by a symlink before the open, O_NOFOLLOW opens the link itself,
            // which grants nothing beyond it; by a directory, the file's rights are a subset.
            let Ok(fd) = open_nofollow(&path) else {
                continue;
            };
            read.push(Entry {
                path,
                fd,
                is_dir: kind.is_dir(),
            });
        }
    }

    let mut write = Vec::new();
    for p in &spec.writable {
        let canon = fs::canonicalize(p).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                LandlockError::Missing {
                    field: Field::WritablePaths,
                    path: p.clone(),
                }
            } else {
                LandlockError::Open {
                    field: Field::WritablePaths,
                    path: p.clone(),
                    source,
                }
            }
        })?;
        if has_newline(&canon) {
            return Err(LandlockError::BadCharacter {
                field: Field::WritablePaths,
                path: canon,
            });
        }
        let (fd, meta) = open_path(&canon, true).map_err(|source| LandlockError::Open {
            field: Field::WritablePaths,
            path: p.clone(),
            source,
        })?;
        // The inode just opened (what `Stamp::inode(p)` would find, without another stat).
        stamps.push(Stamp {
            path: p.clone(),
            kind: StampKind::Inode(Some((meta.dev(), meta.ino()))),
        });
        // Read rights beneath a writable tree would re-open a denied path inside it (or be
        // inherited by a writable path inside a denied one): there, reads come from the
        // carve-out alone and the deny list wins.
        let overlaps = denied
            .iter()
            .any(|d| d.starts_with(&canon) || canon.starts_with(d));
        write.push((
            Entry {
                path: canon,
                fd,
                is_dir: meta.is_dir(),
            },
            !overlaps,
        ));
    }

    // No stat: the device rights are file rights, which a rule on a file and one on a
    // directory carry alike (`rights_for`), so whether each is a directory changes nothing.
    let mut dev = Vec::new();
    for p in DEVICES
        .iter()
        .chain((!spec.own_terminals_only).then_some(&PTS))
    {
        if let Ok(fd) = open_follow(Path::new(p)) {
            dev.push(Entry {
                path: PathBuf::from(p),
                fd,
                is_dir: false,
            });
        }
    }

    Ok(Plan {
        read,
        write,
        dev,
        absent,
        stamps: listings.stamps.into_iter().chain(stamps).collect(),
    })
}

/// A protection and the ABI it needs.
struct Need {
    abi: u8,
    enforced: Option<&'static str>,
    words: &'static str,
}

fn needs(spec: &Spec) -> Vec<Need> {
    let mut v = Vec::new();
    if !spec.deny_read.is_empty() {
        v.push(Need {
            abi: 1,
            enforced: Some("fs-read-deny"),
            words: "file read restriction",
        });
    }
    v.push(Need {
        abi: 1,
        enforced: Some("fs-write"),
        words: "file write restriction",
    });
    v.push(Need {
        abi: 3,
        enforced: None,
        words: "truncate restriction",
    });
    v.push(Need {
        abi: 5,
        enforced: None,
        words: "device ioctl restriction",
    });
    if spec.tcp != Tcp::Any {
        v.push(Need {
            abi: 4,
            enforced: Some("tcp"),
            words: "TCP restriction",
        });
    }
    if spec.scoped {
        v.push(Need {
            abi: 6,
            enforced: Some("scope-signal"),
            words: "signal scoping",
        });
        v.push(Need {
            abi: 6,
            enforced: Some("scope-abstract-unix"),
            words: "abstract unix socket scoping",
        });
    }
    v
}

const READ: BitFlags<AccessFs> = make_bitflags!(AccessFs::{ReadFile | ReadDir | Execute});
const DEV: BitFlags<AccessFs> =
    make_bitflags!(AccessFs::{ReadFile | WriteFile | Truncate | IoctlDev});

/// Restricts `rights` to those a rule on this entry may carry (files take no directory rights).
fn rights_for(entry: &Entry, rights: BitFlags<AccessFs>, abi: ABI) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    if entry.is_dir {
        rights & all
    } else {
        rights & AccessFs::from_file(abi)
    }
}

/// Builds the ruleset for `spec` in the calling process (this opens the paths).
///
/// `max_abi` lowers the ABI used, to test degraded kernels ([`max_abi_from_env`]). `Off`
/// gives `Ok(None)`. `Required` fails with [`LandlockError::Unavailable`] naming every asked
/// protection the ABI cannot enforce; `Preferred` enforces what it can and lists the rest in
/// [`Status::missing`].
pub fn prepare(
    spec: &Spec,
    mode: Mode,
    max_abi: Option<u8>,
) -> Result<Option<Prepared>, LandlockError> {
    if mode == Mode::Off {
        return Ok(None);
    }
    let plan = plan(spec)?;
    let kernel = abi().unwrap_or(0);
    let used = max_abi.map_or(kernel, |m| m.min(kernel));

    let mut enforced = Vec::new();
    let mut missing = Vec::new();
    for need in needs(spec) {
        if used >= need.abi {
            enforced.extend(need.enforced.map(str::to_owned));
        } else {
            missing.push(format!("Landlock ABI {} ({})", need.abi, need.words));
        }
    }
    if mode == Mode::Required && !missing.is_empty() {
        return Err(LandlockError::Unavailable {
            missing,
            kernel,
            used,
        });
    }
    let status = Status {
        abi: AbiStatus { kernel, used },
        mode,
        enforced,
        missing,
        deny_read_absent: plan.absent.as_slice().into(),
        // Without Landlock nothing is enforced, by covers or otherwise.
        covered: spec.covers_deny_paths() && used >= 1,
    };
    if used == 0 {
        return Ok(Some(Prepared {
            kernel: OnceLock::new(),
            mode,
            status,
            stamps: plan.stamps,
            raw: None,
        }));
    }
    let raw = raw_rules(spec, used, plan.read, plan.write, plan.dev);
    Ok(Some(Prepared {
        kernel: OnceLock::new(),
        mode,
        status,
        stamps: plan.stamps,
        raw: Some(Arc::new(raw)),
    }))
}

/// The rules of [`build`] in the kernel's terms (same accesses, same descriptors).
fn raw_rules(
    spec: &Spec,
    used: u8,
    read: Vec<Entry>,
    write: Vec<(Entry, bool)>,
    dev: Vec<Entry>,
) -> RawRules {
    let abi = ABI::from(i32::from(used));
    let all = AccessFs::from_all(abi);
    let mut net = 0;
    let mut ports = Vec::new();
    if used >= 4 && spec.tcp != Tcp::Any {
        net = make_bitflags!(AccessNet::{BindTcp | ConnectTcp}).bits();
        if let Tcp::Ports(list) = &spec.tcp {
            ports = list
                .iter()
                .map(|p| (u64::from(*p), BitFlags::from(AccessNet::ConnectTcp).bits()))
                .collect();
        }
    }
    let scoped = if used >= 6 && spec.scoped {
        make_bitflags!(Scope::{Signal | AbstractUnixSocket}).bits()
    } else {
        0
    };
    let mut paths = Vec::new();
    let mut fds = Vec::new();
    let mut push = |e: Entry, rights: BitFlags<AccessFs>| {
        paths.push((e.fd.as_raw_fd(), rights_for(&e, rights, abi).bits()));
        fds.push(e.fd);
    };
    for e in read {
        push(e, READ);
    }
    let write_only = all & !READ;
    for (e, with_read) in write {
        push(e, if with_read { all } else { write_only });
    }
    for e in dev {
        push(e, DEV);
    }
    RawRules {
        attr: [all.bits(), net, scoped],
        attr_size: 24,
        paths,
        ports,
        read: (READ & all).bits(),
        all: all.bits(),
        dev: (DEV & AccessFs::from_file(abi)).bits(),
        fds,
    }
}

/// A second fd on the same ruleset for [`Prepared::raw_fd`]: the crate keeps its own fd
/// private and hands one out only by converting a `RulesetCreated` (here, a clone).
fn ruleset_fd(ruleset: &RulesetCreated) -> Result<Option<OwnedFd>, LandlockError> {
    let copy = ruleset
        .try_clone()
        .map_err(|e| LandlockError::Restrict(e.to_string()))?;
    Ok(copy.into())
}

/// The kernel's ruleset for `raw` (the rules of [`raw_rules`]), created with the crate.
fn build(mode: Mode, raw: &RawRules) -> Result<RulesetCreated, ::landlock::RulesetError> {
    // Only features of the ABI in use are requested (`raw_rules` chose them), so the crate's
    // compatibility handling only has to catch a kernel that claims more than it enforces:
    // Required makes that an error instead of a silent downgrade.
    let level = match mode {
        Mode::Required => CompatLevel::HardRequirement,
        _ => CompatLevel::BestEffort,
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(BitFlags::<AccessFs>::from_bits_truncate(raw.attr[0]))?;
    if raw.attr[1] != 0 {
        ruleset = ruleset.handle_access(BitFlags::<AccessNet>::from_bits_truncate(raw.attr[1]))?;
    }
    if raw.attr[2] != 0 {
        ruleset = ruleset.scope(BitFlags::<Scope>::from_bits_truncate(raw.attr[2]))?;
    }
    let mut created = ruleset.create()?;
    for ((_, rights), fd) in raw.paths.iter().zip(&raw.fds) {
        created = created.add_rule(PathBeneath::new(
            fd,
            BitFlags::<AccessFs>::from_bits_truncate(*rights),
        ))?;
    }
    for (port, _) in &raw.ports {
        created = created.add_rule(NetPort::new(*port as u16, AccessNet::ConnectTcp))?;
    }
    Ok(created)
}

/// How many distinct prepared rulesets [`prepare_cached`] keeps.
const CACHE_SIZE: usize = 8;

type CacheKey = (Spec, Mode, Option<u8>);

static CACHE: Mutex<Vec<(CacheKey, Arc<Prepared>)>> = Mutex::new(Vec::new());

/// [`prepare`] with a small cache (the most recent distinct specs), so repeated requests do
/// not rebuild the carve-out. A cached ruleset is reused only while what it was built from is
/// unchanged (see docs/paths.md); otherwise it is rebuilt.
pub fn prepare_cached(
    spec: &Spec,
    mode: Mode,
    max_abi: Option<u8>,
) -> Result<Option<Arc<Prepared>>, LandlockError> {
    if mode == Mode::Off {
        return Ok(None);
    }
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = cache
            .iter()
            .position(|((s, m, a), _)| s == spec && *m == mode && *a == max_abi)
        {
            let (key, prepared) = cache.remove(i);
            if prepared.is_current() {
                cache.insert(0, (key, Arc::clone(&prepared)));
                return Ok(Some(prepared));
            }
        }
    }
    // Built outside the lock: other specs need not wait for this one.
    let Some(prepared) = prepare(spec, mode, max_abi)? else {
        return Ok(None);
    };
    let prepared = Arc::new(prepared);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|((s, m, a), _)| !(s == spec && *m == mode && *a == max_abi));
    cache.insert(0, ((spec.clone(), mode, max_abi), Arc::clone(&prepared)));
    cache.truncate(CACHE_SIZE);
    Ok(Some(prepared))
}

/// The same rules as text, for the preload route (`SANDBOX_LANDLOCK`; format in
/// docs/paths.md), which `libsandbox.so` applies before its seccomp filter. Paths that cannot
/// be opened are left out (not granted). `Required` is checked here too (the same error as
/// [`prepare`]), so `sandbox env` refuses at once on a kernel that cannot enforce it; the
/// library checks again where the command runs. `max_abi` is carried along (`abi N`).
pub fn preload_value(
    spec: &Spec,
    mode: Mode,
    max_abi: Option<u8>,
) -> Result<String, LandlockError> {
    // The preload route has no view to cover the deny paths: its rules always carve.
    let carved = Spec {
        covered: false,
        ..spec.clone()
    };
    let spec = &carved;
    if mode == Mode::Required {
        prepare(spec, mode, max_abi)?;
    }
    let plan = plan(spec)?;
    let mut out = String::from("landlock 1\n");
    out.push_str(if mode == Mode::Required {
        "mode required\n"
    } else {
        "mode preferred\n"
    });
    if let Some(abi) = max_abi {
        out.push_str(&format!("abi {abi}\n"));
    }
    if spec.scoped {
        out.push_str("scope signal\nscope abstract\n");
    }
    match &spec.tcp {
        Tcp::Any => {}
        Tcp::Ports(ports) if !ports.is_empty() => {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            out.push_str(&format!("tcp ports {}\n", list.join(",")));
        }
        _ => out.push_str("tcp deny\n"),
    }
    let mut line = |kind: &str, path: &Path| {
        out.push_str(kind);
        out.push(' ');
        out.push_str(&path.to_string_lossy());
        out.push('\n');
    };
    for e in &plan.read {
        line("ro", &e.path);
    }
    for (e, with_read) in &plan.write {
        line(if *with_read { "rw" } else { "wo" }, &e.path);
    }
    for e in &plan.dev {
        line("dev", &e.path);
    }
    out.pop();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// A ctime is settled only when it is more than two seconds old: one within the margin
    /// (a later change could repeat it), in the future (a clock set back) or before 1970 is not.
    #[test]
    fn only_a_ctime_older_than_the_margin_is_settled() {
        let now = UNIX_EPOCH + Duration::new(1_000_000, 500);
        assert!(settled(999_997, 0, now));
        assert!(settled(999_997, 999_999_999, now));
        assert!(!settled(999_998, 500, now));
        assert!(!settled(999_999, 0, now));
        assert!(!settled(1_000_000, 500, now));
        assert!(!settled(1_000_005, 0, now));
        assert!(!settled(-1, 0, now));
    }

    /// A directory's stamp changes when an entry is added, even when its mtime is set back
    /// (the ctime moves on); the old key, device, inode and mtime, did not change.
    #[test]
    fn a_stamp_sees_an_entry_added_behind_a_reset_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let old = fs::metadata(dir.path()).unwrap();
        // Settled by hand: the stamp as it would be two seconds later.
        let stamp = Stamp {
            path: dir.path().to_owned(),
            kind: StampKind::Dir(Some((old.dev(), old.ino(), old.ctime(), old.ctime_nsec()))),
        };
        fs::write(dir.path().join("login.keyring"), "k").unwrap();
        let times = fs::FileTimes::new()
            .set_modified(old.modified().unwrap())
            .set_accessed(old.accessed().unwrap());
        fs::File::open(dir.path())
            .unwrap()
            .set_times(times)
            .unwrap();
        let new = fs::metadata(dir.path()).unwrap();
        let mtime_key = |m: &fs::Metadata| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec());
        assert_eq!(mtime_key(&new), mtime_key(&old), "control: mtime reset");
        assert!(!stamp.is_current());
        assert!(
            !Stamp::dir(dir.path()).is_current(),
            "just changed: unsettled"
        );
    }
}
