//! Writing the embedded preload to disk safely, once per process.
//!
//! The library goes into a private directory (owned by us, not writable by group or others,
//! not a symlink) under a content-addressed name, `libsandbox-<sha256 prefix>.so`, with mode
//! 0444: nobody has write permission, so a program running as the same user cannot rewrite it
//! by opening it (it would have to change the mode first, which the read-only profiles forbid
//! and Landlock will forbid for all). It is written to a temporary file in the same directory,
//! synced and renamed into place, so concurrent processes never see a partial file. An
//! existing file is reused only after its owner, type, mode, size and every byte have been
//! checked; anything else is replaced the same way. Paths that glibc would split (spaces, colons) and
//! directories on `noexec` mounts are refused, because glibc ignores a preload it cannot map
//! and runs the program without it.

use crate::embedded::{LIBSANDBOX, SHA256_HEX};
use sha2::{Digest, Sha256};
use std::fs::{self, File, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The mode of an extracted library: readable by everyone (a program running as another user
/// must be able to open it) and writable by nobody, so that a sandboxed program of the same
/// user cannot open it for writing. The execute bit is not needed.
pub const LIBRARY_MODE: u32 = 0o444;

/// The largest operator-given library read for hashing (the embedded one is about 85 KB).
pub const MAX_EXPLICIT_BYTES: u64 = 64 << 20;

/// The mode of a directory created for the library.
pub const DIR_MODE: u32 = 0o700;

/// Why the preload cannot be provided at a usable path.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// A file system call failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The directory is not private: a symlink, not a directory, not ours, or writable by others.
    #[error("{} is not a safe directory for the preload: {reason}", path.display())]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// glibc splits `LD_PRELOAD` on spaces and colons, so this path would not load.
    #[error("{} contains a space or a colon, which LD_PRELOAD cannot carry", path.display())]
    UnsafePathChars {
        /// The path.
        path: PathBuf,
    },
    /// The path is on a `noexec` mount: glibc would fail to map the library and run the
    /// program without it.
    #[error("{} is on a noexec mount: the loader could not map the preload and would run programs unsandboxed", path.display())]
    Noexec {
        /// The path.
        path: PathBuf,
    },
    /// A file at the library's name belongs to another user: refusing to use or replace it.
    #[error("{} is owned by uid {uid}, not by us (uid {euid}): refusing to use or replace it", path.display())]
    ForeignOwner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// Our effective uid.
        euid: u32,
    },
    /// The freshly written library did not verify (something changed it concurrently).
    #[error("{} does not hold the embedded preload after writing it: {reason}", path.display())]
    VerifyFailed {
        /// The file.
        path: PathBuf,
        /// What differed.
        reason: String,
    },
    /// An operator-given library is not usable.
    #[error("{} cannot be used as the preload: {reason}", path.display())]
    BadLibrary {
        /// The file.
        path: PathBuf,
        /// Why not.
        reason: String,
    },
    /// `extract_to` was given a destination whose parent directory does not exist.
    #[error("cannot write the preload to {}: directory {} does not exist", path.display(), parent.display())]
    MissingParent {
        /// The destination.
        path: PathBuf,
        /// Its parent.
        parent: PathBuf,
    },
    /// No candidate directory was usable; each one's reason is listed.
    #[error("no usable directory for the preload: {}", join_reasons(.0))]
    NoDirectory(Vec<ExtractError>),
    /// The library (or a directory it would go into) lies in a place the commands that load
    /// it may write: one of them could replace it and run the later ones unconfined.
    #[error("{} is inside {}, which the commands may write", path.display(), place.display())]
    InsideWritable {
        /// The library, or the candidate directory.
        path: PathBuf,
        /// The writable place that holds it.
        place: PathBuf,
    },
}

impl ExtractError {
    /// The writable place that ruled out the library's directory, when that is why no
    /// directory was usable (the first such place of the candidates, in order).
    pub fn writable_place(&self) -> Option<&Path> {
        match self {
            ExtractError::InsideWritable { place, .. } => Some(place),
            ExtractError::NoDirectory(all) => all.iter().find_map(ExtractError::writable_place),
            _ => None,
        }
    }
}

fn join_reasons(errors: &[ExtractError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ExtractError {
    let path = path.to_path_buf();
    move |e| ExtractError::Io {
        what,
        path,
        source: Arc::new(e),
    }
}

/// The library's file name: `libsandbox-<first 16 hex digits of its SHA-256>.so`.
pub fn file_name() -> String {
    format!("libsandbox-{}.so", &SHA256_HEX[..16])
}

/// Extracts the embedded library into the per-user directory (once per process) and returns
/// its path, verified and safe to put in `LD_PRELOAD`.
///
/// Candidates, in order: `$XDG_RUNTIME_DIR/sandbox`, `$XDG_CACHE_HOME/sandbox` (or
/// `~/.cache/sandbox`), then a fresh private temporary directory. A candidate that is unusable
/// (unsafe, noexec, a space or colon in its path) is skipped; a library file that is owned by
/// someone else is a hard error.
pub fn extracted() -> Result<PathBuf, ExtractError> {
    static ONCE: OnceLock<Result<PathBuf, ExtractError>> = OnceLock::new();
    ONCE.get_or_init(extract_default).clone()
}

/// The directories tried first: `$XDG_RUNTIME_DIR/sandbox`, then `$XDG_CACHE_HOME/sandbox`
/// (or `~/.cache/sandbox`).
fn default_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let candidates = [
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            // A HOME that does not exist (`/nonexistent` of system users) is not created.
            .or_else(|| {
                home.filter(|h| h.is_absolute() && h.is_dir())
                    .map(|h| h.join(".cache"))
            }),
    ];
    candidates
        .into_iter()
        .flatten()
        .map(|base| base.join("sandbox"))
        .collect()
}

/// Tries `dirs` in order: the first that can be made private and holds (or now holds) the
/// verified library wins. Reasons for skipping go to `skipped`; a library file owned by
/// someone else is a hard error.
fn first_usable(
    dirs: impl IntoIterator<Item = PathBuf>,
    skipped: &mut Vec<ExtractError>,
) -> Result<Option<PathBuf>, ExtractError> {
    for dir in dirs {
        match prepare_dir(&dir).and_then(|()| extract_into(&dir)) {
            Ok(path) => return Ok(Some(path)),
            Err(e @ ExtractError::ForeignOwner { .. }) => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "skipping preload directory");
                skipped.push(e);
            }
        }
    }
    Ok(None)
}

fn extract_default() -> Result<PathBuf, ExtractError> {
    let mut skipped = Vec::new();
    if let Some(path) = first_usable(default_dirs(), &mut skipped)? {
        return Ok(path);
    }
    let tmp = tempfile::Builder::new()
        .prefix("sandbox-")
        .tempdir()
        .map_err(io_err(
            "creating a temporary directory in",
            &std::env::temp_dir(),
        ));
    match tmp {
        // The directory must outlive this process's children, so it is kept.
        Ok(tmp) => match extract_into(&tmp.keep()) {
            Ok(path) => return Ok(path),
            Err(e) => skipped.push(e),
        },
        Err(e) => skipped.push(e),
    }
    Err(ExtractError::NoDirectory(skipped))
}

/// Extracts the embedded library into a directory outside every place of `writable` (the
/// places the commands that will load it may write: workspace, `--allow-write` paths, their
/// TMPDIR) and returns its path.
///
/// The default directories come first, as for [`extracted`]; one that lies in a writable
/// place is skipped before anything is created in it. Then, in order: `lib` in the per-user
/// state directory, `/run/user/<uid>/sandbox` (when that runtime directory exists),
/// `sandbox-lib-<uid>` in the temporary directory and in `/tmp`. Directories another user
/// owns fail the usual checks and are skipped. With every candidate ruled out the error lists
/// each one's reason, and [`ExtractError::writable_place`] names the place that ruled out
/// the first of them (for the message naming the flag that made it writable).
pub fn extracted_outside(writable: &[PathBuf]) -> Result<PathBuf, ExtractError> {
    let uid = euid();
    let mut dirs = default_dirs();
    dirs.extend(crate::state_dir::get().ok().map(|d| d.join("lib")));
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    if run_user.is_dir() {
        dirs.push(run_user.join("sandbox"));
    }
    for tmp in [std::env::temp_dir(), PathBuf::from("/tmp")] {
        let dir = tmp.join(format!("sandbox-lib-{uid}"));
        if tmp.is_absolute() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let mut skipped = Vec::new();
    let mut outside = Vec::new();
    for dir in dirs {
        match writable_container(&dir.join(file_name()), writable) {
            Some(place) => skipped.push(ExtractError::InsideWritable {
                path: dir,
                place: place.to_path_buf(),
            }),
            None => outside.push(dir),
        }
    }
    match first_usable(outside, &mut skipped)? {
        Some(path) => Ok(path),
        None => Err(ExtractError::NoDirectory(skipped)),
    }
}

/// The place of `writable` that holds `path` (is `path` itself or a directory above it), as
/// the kernel resolves both: a command that may write there could replace what is at `path`.
/// A path whose existing part cannot be resolved, or that climbs with `..` below it, counts
/// as held by the first place (when there is one): what cannot be shown outside is not.
pub fn writable_container<'a>(path: &Path, writable: &'a [PathBuf]) -> Option<&'a Path> {
    let Some(path) = resolved(path) else {
        return writable.first().map(PathBuf::as_path);
    };
    writable
        .iter()
        .find(|w| resolved(w).is_some_and(|w| path.starts_with(w)))
        .map(PathBuf::as_path)
}

/// `path` with the symlinks of its longest existing prefix resolved; the missing rest is
/// appended as written. `None` when the rest holds `..` or `.`, or nothing of it resolves.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut here = path;
    loop {
        if let Ok(real) = fs::canonicalize(here) {
            return Some(rest.iter().rev().fold(real, |p, name| p.join(name)));
        }
        match (here.parent(), here.file_name()) {
            (Some(parent), Some(name)) if name != ".." && name != "." => {
                rest.push(name.to_os_string());
                here = parent;
            }
            _ => return None,
        }
    }
}

/// Creates `dir` (mode 0700, parents as needed) if it does not exist.
fn prepare_dir(dir: &Path) -> Result<(), ExtractError> {
    match fs::symlink_metadata(dir) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)
            {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                Err(e) => Err(io_err("creating", dir)(e)),
            }
        }
        Err(e) => Err(io_err("inspecting", dir)(e)),
    }
}

/// Extracts the embedded library into `dir`, which must already exist and be private, and
/// returns the verified path. Safe to call from many processes at once.
pub fn extract_into(dir: &Path) -> Result<PathBuf, ExtractError> {
    check_dir(dir)?;
    let target = dir.join(file_name());
    check_path_chars(&target)?;
    check_exec_mount(dir)?;
    match verify(&target) {
        Ok(()) => return Ok(target),
        Err(Mismatch::Missing) => {}
        Err(Mismatch::Foreign(uid)) => {
            return Err(ExtractError::ForeignOwner {
                path: target,
                uid,
                euid: euid(),
            })
        }
        Err(Mismatch::Io(e)) => return Err(io_err("checking", &target)(e)),
        Err(Mismatch::Wrong(reason)) => {
            tracing::warn!(path = %target.display(), %reason, "replacing an invalid preload file");
        }
    }
    write_atomically(dir, &target)?;
    match verify(&target) {
        Ok(()) => Ok(target),
        Err(Mismatch::Foreign(uid)) => Err(ExtractError::ForeignOwner {
            path: target,
            uid,
            euid: euid(),
        }),
        Err(m) => Err(ExtractError::VerifyFailed {
            path: target,
            reason: m.to_string(),
        }),
    }
}

/// Writes the embedded library to `dest` (for `sandbox extract --to`): mode 0444, written to
/// a temporary file next to it and renamed into place. Call [`explicit`] on the result to
/// check that it is usable as `libsandboxPath`.
pub fn extract_to(dest: &Path) -> Result<(), ExtractError> {
    let parent = match dest.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => {
            return Err(ExtractError::MissingParent {
                path: dest.to_path_buf(),
                parent: PathBuf::new(),
            })
        }
    };
    if !parent.is_dir() {
        return Err(ExtractError::MissingParent {
            path: dest.to_path_buf(),
            parent: parent.to_path_buf(),
        });
    }
    if dest.is_dir() {
        return Err(ExtractError::Io {
            what: "writing",
            path: dest.to_path_buf(),
            source: Arc::new(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            )),
        });
    }
    write_atomically(parent, dest)
}

/// Checks an operator-given library path (`libsandboxPath`) and returns its canonical path
/// (the one to put in `LD_PRELOAD`).
///
/// The file must be a regular file (not a symlink) owned by root or the caller and not
/// writable by group or others; every directory from it up to `/` must be owned by root or the
/// caller and not writable by others (a sticky directory such as `/tmp` is accepted, since the
/// entry below it is ours or root's and others cannot replace it). Its SHA-256 must equal the
/// embedded library's, or `expected_sha256` (64 hex digits) when the operator opted into
/// another library (`libsandboxSha256`). It must be an ELF shared object for this machine, at a
/// path without spaces or colons, not on a `noexec` mount.
pub fn explicit(path: &Path, expected_sha256: Option<&str>) -> Result<PathBuf, ExtractError> {
    let given = std::path::absolute(path).map_err(io_err("resolving", path))?;
    let bad = |path: &Path, reason: String| ExtractError::BadLibrary {
        path: path.to_path_buf(),
        reason,
    };
    let expected = match expected_sha256 {
        Some(h) => Some(parse_sha256(h).ok_or_else(|| {
            bad(
                &given,
                format!("libsandboxSha256 `{h}` is not 64 hexadecimal digits"),
            )
        })?),
        None => None,
    };
    let meta = fs::symlink_metadata(&given).map_err(io_err("inspecting", &given))?;
    if meta.file_type().is_symlink() {
        return Err(bad(
            &given,
            "it is a symlink; give the path of the file itself".into(),
        ));
    }
    if !meta.is_file() {
        return Err(bad(&given, "not a regular file".into()));
    }
    let (Some(parent), Some(name)) = (given.parent(), given.file_name()) else {
        return Err(bad(&given, "not a file path".into()));
    };
    let path = fs::canonicalize(parent)
        .map_err(io_err("resolving", parent))?
        .join(name);
    check_path_chars(&path)?;
    check_trusted_chain(&path).map_err(|r| bad(&path, r))?;
    check_exec_mount(&path)?;
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io_err("opening", &path))?;
    // The same checks on what was opened, so a swap after the path checks is caught.
    let meta = file.metadata().map_err(io_err("inspecting", &path))?;
    check_trusted_file(&meta).map_err(|r| bad(&path, r))?;
    if meta.len() > MAX_EXPLICIT_BYTES {
        return Err(bad(
            &path,
            format!("{} bytes, more than a preload can be", meta.len()),
        ));
    }
    let mut bytes = Vec::new();
    (&file)
        .take(MAX_EXPLICIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err("reading", &path))?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    match expected {
        None if digest != sha256_bytes() => {
            return Err(bad(
                &path,
                format!(
                    "its SHA-256 {} is not the embedded library's {SHA256_HEX}; to use another library, give its hash as libsandboxSha256",
                    hex(&digest)
                ),
            ))
        }
        Some(want) if digest != want => {
            return Err(bad(
                &path,
                format!(
                    "its SHA-256 {} differs from libsandboxSha256 {}",
                    hex(&digest),
                    hex(&want)
                ),
            ))
        }
        _ => {}
    }
    check_shared_object(&bytes).map_err(|r| bad(&path, r))?;
    Ok(path)
}

/// Parses 64 hex digits (either case) into a SHA-256.
fn parse_sha256(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `uid` may own what an operator-given library depends on: root or the caller.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == euid()
}

/// The owner and mode checks of an operator-given library file.
fn check_trusted_file(meta: &fs::Metadata) -> Result<(), String> {
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if !trusted_owner(meta.uid()) {
        return Err(format!(
            "it is owned by uid {}, not by root or the caller (uid {})",
            meta.uid(),
            euid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "its mode {:04o} lets group or others change it; chmod go-w it",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Checks the file at the canonical `path` and every directory above it: owned by root or the
/// caller, and not writable by others (unless sticky: then others cannot replace our entry).
fn check_trusted_chain(path: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("inspecting it: {e}"))?;
    check_trusted_file(&meta)?;
    for dir in path.ancestors().skip(1) {
        let m =
            fs::symlink_metadata(dir).map_err(|e| format!("inspecting {}: {e}", dir.display()))?;
        if !trusted_owner(m.uid()) {
            return Err(format!(
                "directory {} is owned by uid {}, not by root or the caller (uid {}), who could replace the library",
                dir.display(),
                m.uid(),
                euid()
            ));
        }
        if m.mode() & 0o022 != 0 && m.mode() & libc::S_ISVTX == 0 {
            return Err(format!(
                "directory {} (mode {:04o}) lets group or others replace the library; chmod go-w it",
                dir.display(),
                m.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// Checks that `bytes` are an ELF shared object (ET_DYN, no PT_INTERP) of the host's class
/// and machine.
fn check_shared_object(bytes: &[u8]) -> Result<(), String> {
    use goblin::elf::{header, program_header::PT_INTERP, Elf};
    let elf = Elf::parse(bytes).map_err(|e| format!("not an ELF file ({e})"))?;
    if !elf.is_64 {
        return Err("a 32-bit ELF file; the host's loader is 64-bit".into());
    }
    let machine = crate::admission::host_machine();
    if elf.header.e_machine != machine {
        return Err(format!(
            "built for {}, not {}",
            header::machine_to_str(elf.header.e_machine),
            header::machine_to_str(machine)
        ));
    }
    if elf.header.e_type != header::ET_DYN {
        return Err(format!(
            "ELF type {}, not a shared object",
            header::et_to_str(elf.header.e_type)
        ));
    }
    if elf.program_headers.iter().any(|ph| ph.p_type == PT_INTERP) || !elf.is_lib {
        return Err("an executable, not a shared library".into());
    }
    Ok(())
}

/// Refuses a path that glibc would split in `LD_PRELOAD`.
fn check_path_chars(path: &Path) -> Result<(), ExtractError> {
    if path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b' ' | b':' | b'\t' | b'\n'))
    {
        return Err(ExtractError::UnsafePathChars {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuses a path on a `noexec` mount.
fn check_exec_mount(path: &Path) -> Result<(), ExtractError> {
    let noexec =
        crate::sys::on_noexec_mount(path).map_err(io_err("checking the mount of", path))?;
    if noexec {
        return Err(ExtractError::Noexec {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The effective uid of this process.
fn euid() -> u32 {
    crate::sys::euid()
}

/// Checks that `dir` is a real directory (not a symlink), owned by us, not writable by group
/// or others; and that its parent cannot be used to swap it (not writable by others, unless
/// sticky).
fn check_dir(dir: &Path) -> Result<(), ExtractError> {
    let unsafe_dir = |reason: String| ExtractError::UnsafeDirectory {
        path: dir.to_path_buf(),
        reason,
    };
    let meta = fs::symlink_metadata(dir).map_err(io_err("inspecting", dir))?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("it is a symlink".into()));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory".into()));
    }
    if meta.uid() != euid() {
        return Err(unsafe_dir(format!(
            "it is owned by uid {}, not by us (uid {})",
            meta.uid(),
            euid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir(format!(
            "its mode {:04o} lets group or others write to it",
            meta.mode() & 0o7777
        )));
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        let pm = fs::metadata(parent).map_err(io_err("inspecting", parent))?;
        if pm.mode() & 0o022 != 0 && pm.mode() & libc::S_ISVTX == 0 {
            return Err(unsafe_dir(format!(
                "its parent {} (mode {:04o}) lets others replace it",
                parent.display(),
                pm.mode() & 0o7777
            )));
        }
    }
    Ok(())
}

/// Why an existing file is not the embedded library.
enum Mismatch {
    /// Nothing at that name.
    Missing,
    /// Owned by another user.
    Foreign(u32),
    /// Ours, but wrong (type, mode, size or content).
    Wrong(String),
    /// Could not be inspected.
    Io(io::Error),
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Missing => f.write_str("the file is missing"),
            Mismatch::Foreign(uid) => write!(f, "owned by uid {uid}"),
            Mismatch::Wrong(why) => f.write_str(why),
            Mismatch::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Checks that `path` is a regular file (not a symlink) owned by us, mode 0444, holding
/// exactly the embedded bytes. `lstat` rejects symlinks and special files before anything is
/// opened; the file is then opened with `O_NOFOLLOW` and every check is repeated on the open
/// descriptor, so a concurrent rename cannot make a wrong file pass.
fn verify(path: &Path) -> Result<(), Mismatch> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Mismatch::Missing),
        Err(e) => return Err(Mismatch::Io(e)),
    };
    check_meta(&meta)?;
    let file = match File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Mismatch::Wrong("a symlink".into()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Mismatch::Missing),
        Err(e) => return Err(Mismatch::Io(e)),
    };
    check_meta(&file.metadata().map_err(Mismatch::Io)?)?;
    let mut bytes = Vec::with_capacity(LIBSANDBOX.len());
    (&file)
        .take(LIBSANDBOX.len() as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(Mismatch::Io)?;
    if bytes.len() != LIBSANDBOX.len() || Sha256::digest(&bytes)[..] != sha256_bytes()[..] {
        return Err(Mismatch::Wrong(
            "its content differs from the embedded library".into(),
        ));
    }
    Ok(())
}

/// The metadata checks of [`verify`]: owner, type, mode and size.
fn check_meta(meta: &fs::Metadata) -> Result<(), Mismatch> {
    if meta.uid() != euid() {
        return Err(Mismatch::Foreign(meta.uid()));
    }
    if meta.file_type().is_symlink() {
        return Err(Mismatch::Wrong("a symlink".into()));
    }
    if !meta.is_file() {
        return Err(Mismatch::Wrong("not a regular file".into()));
    }
    // Exactly 0444: no write bit for anyone (a writable copy could be rewritten by a program
    // of the same user after it was checked), no set-id or sticky bits.
    if meta.mode() & 0o7777 != LIBRARY_MODE {
        return Err(Mismatch::Wrong(format!(
            "mode {:04o}, not {LIBRARY_MODE:04o}",
            meta.mode() & 0o7777
        )));
    }
    if meta.len() != LIBSANDBOX.len() as u64 {
        return Err(Mismatch::Wrong(format!(
            "{} bytes, not {}",
            meta.len(),
            LIBSANDBOX.len()
        )));
    }
    Ok(())
}

/// The embedded library's SHA-256 as bytes.
fn sha256_bytes() -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&SHA256_HEX[2 * i..2 * i + 2], 16).expect("build.rs writes hex");
    }
    out
}

/// Writes the embedded bytes to a temporary file in `dir`, mode 0444, syncs it and renames it
/// to `target` (replacing whatever entry is there: a symlink is replaced, never followed).
fn write_atomically(dir: &Path, target: &Path) -> Result<(), ExtractError> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".libsandbox-")
        .suffix(".tmp")
        .permissions(Permissions::from_mode(LIBRARY_MODE))
        .tempfile_in(dir)
        .map_err(io_err("creating a temporary file in", dir))?;
    // The umask applies at creation; set the mode explicitly.
    tmp.as_file()
        .set_permissions(Permissions::from_mode(LIBRARY_MODE))
        .map_err(io_err("setting the mode of", tmp.path()))?;
    tmp.write_all(LIBSANDBOX)
        .map_err(io_err("writing", tmp.path()))?;
    tmp.as_file()
        .sync_all()
        .map_err(io_err("syncing", tmp.path()))?;
    tmp.persist(target)
        .map_err(|e| io_err("renaming into place", target)(e.error))?;
    // Make the rename durable; failure here does not make the file wrong.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_is_content_addressed() {
        let name = file_name();
        assert_eq!(name.len(), "libsandbox-.so".len() + 16);
        assert!(name.starts_with("libsandbox-") && name.ends_with(".so"));
        assert_eq!(Sha256::digest(LIBSANDBOX)[..], sha256_bytes()[..]);
    }

    #[test]
    fn split_characters_are_refused() {
        assert!(check_path_chars(Path::new("/a b/x.so")).is_err());
        assert!(check_path_chars(Path::new("/a:b/x.so")).is_err());
        assert!(check_path_chars(Path::new("/ab/x.so")).is_ok());
    }

    #[test]
    fn embedded_library_is_a_shared_object() {
        check_shared_object(LIBSANDBOX).unwrap();
    }

    #[test]
    fn a_place_holds_what_is_below_it_through_symlinks_and_dot_dot_counts_as_held() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        fs::create_dir_all(ws.join("cache")).unwrap();
        let other = t.path().join("other");
        fs::create_dir(&other).unwrap();
        let places = [ws.clone()];
        let lib = |p: &Path| p.join("sandbox").join(file_name());
        // Missing below an existing directory of the place, and the place itself.
        assert_eq!(
            writable_container(&lib(&ws.join("cache")), &places),
            Some(ws.as_path())
        );
        assert_eq!(writable_container(&ws, &places), Some(ws.as_path()));
        // Control: beside it, and a name that only starts with the same text.
        assert_eq!(writable_container(&lib(&other), &places), None);
        assert_eq!(
            writable_container(&lib(&t.path().join("wsx")), &places),
            None
        );
        // A symlink outside that leads into it.
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        assert_eq!(writable_container(&lib(&link), &places), Some(ws.as_path()));
        // A writable place given through a symlink holds what its target holds.
        assert_eq!(
            writable_container(&lib(&ws), std::slice::from_ref(&link)),
            Some(link.as_path())
        );
        // `..` in the missing part cannot be shown outside: held.
        let climbing = other.join("missing/../../ws/x");
        assert_eq!(writable_container(&climbing, &places), Some(ws.as_path()));
        assert_eq!(writable_container(&climbing, &[]), None);
    }

    #[test]
    fn extracted_outside_skips_directories_in_writable_places() {
        let t = tempfile::tempdir().unwrap();
        // Every place: no directory is left, and the error names the place.
        let all = [PathBuf::from("/")];
        let e = extracted_outside(&all).unwrap_err();
        assert_eq!(e.writable_place(), Some(Path::new("/")), "{e}");
        // A place that holds none of them changes nothing of the choice's safety.
        let got = extracted_outside(&[t.path().to_path_buf()]).unwrap();
        assert!(!got.starts_with(t.path()), "{got:?}");
        assert_eq!(writable_container(&got, &[t.path().to_path_buf()]), None);
    }

    #[test]
    fn extract_into_private_dir_then_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let a = extract_into(dir.path()).unwrap();
        let mtime = fs::metadata(&a).unwrap().modified().unwrap();
        let b = extract_into(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(fs::metadata(&b).unwrap().modified().unwrap(), mtime);
        assert_eq!(fs::metadata(&b).unwrap().mode() & 0o7777, LIBRARY_MODE);
    }
}
