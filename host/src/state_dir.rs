//! The per-user state directory: where the host keeps what outlives one job (the preload
//! route's temporary directory, the records of the placeholders its jobs made). Nothing of the
//! sandbox's own lives in a directory other users may write: a name there can be taken or
//! pointed elsewhere before the host gets to it (a denial of the route, or a record that makes
//! a job of another user remove a file).
//!
//! Where, first that applies:
//!
//! - root: `/run/sandbox` (when `/run` is root's and only root may write it);
//! - `$XDG_RUNTIME_DIR/sandbox`, when `XDG_RUNTIME_DIR` is absolute and a directory of the
//!   caller's with mode 0700 (as pam_systemd makes it);
//! - `/run/user/<uid>/sandbox`, when that runtime directory is the caller's with mode 0700;
//! - `$XDG_CACHE_HOME/sandbox` (else `$HOME/.cache/sandbox`), when that cache directory (or
//!   `HOME` when `.cache` does not exist yet) is the caller's and no other user may write it;
//! - for a user with none of these (uid 65534 with `HOME=/nonexistent`): a directory of its own
//!   in the temporary directory (`TMPDIR`, else `/tmp`), `sandbox-<uid>` when that is the
//!   caller's, else the first `sandbox-<uid>.*` that is, else a new one with a random name. A
//!   name another user took there is skipped, never used and never a reason to refuse.
//!
//! The directory itself (`sandbox`) is created with mode 0700 when missing, then opened with
//! `O_NOFOLLOW | O_DIRECTORY` and checked with `fstat`: owned by the caller, mode exactly 0700.
//! One that is not (a symlink, another owner, a mode others may use) is refused with a message
//! naming it: in a parent only the caller may write, only the caller (or root) made it so.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The caller's state directory (found and checked once per process), or why there is none.
pub(crate) fn get() -> Result<&'static Path, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| find(crate::sys::euid(), &Env::from_process()))
        .as_deref()
        .map_err(Clone::clone)
}

/// A subdirectory `name` of the state directory, mode 0700, checked as the directory is.
pub(crate) fn sub(name: &str) -> Result<PathBuf, String> {
    let dir = get()?.join(name);
    private(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// The variables the choice depends on.
#[derive(Debug, Default)]
struct Env {
    runtime: Option<PathBuf>,
    cache: Option<PathBuf>,
    home: Option<PathBuf>,
    tmp: PathBuf,
}

impl Env {
    fn from_process() -> Env {
        let var = |k: &str| absolute(std::env::var_os(k));
        Env {
            runtime: var("XDG_RUNTIME_DIR"),
            cache: var("XDG_CACHE_HOME"),
            home: var("HOME"),
            tmp: std::env::temp_dir(),
        }
    }
}

/// A variable's value as a path when it is absolute: an empty or relative one (which would
/// name a directory below wherever the host happens to run) counts as unset.
fn absolute(v: Option<std::ffi::OsString>) -> Option<PathBuf> {
    v.map(PathBuf::from).filter(|p| p.is_absolute())
}

/// A directory that failed the checks, and why; `true` when it was absent and could not be
/// made.
#[derive(Debug)]
struct Refused(String, bool);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Refused> for String {
    fn from(r: Refused) -> String {
        r.0
    }
}

/// Whether `p` is a directory (not a symlink) owned by `uid` that no other user may write;
/// with `exclusive`, that no other user may enter either.
fn owned_parent(p: &Path, uid: u32, exclusive: bool) -> bool {
    let mask = if exclusive { 0o077 } else { 0o022 };
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & mask == 0)
}

fn find(uid: u32, env: &Env) -> Result<PathBuf, String> {
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    // Each candidate that applies, in order. One that is absent and cannot be made (a
    // read-only `/run` in `docker run --read-only`) is skipped for the next and said in the
    // error only when none is left; one that exists but fails the checks (a symlink, another
    // owner, an open mode) is refused, naming it: in a parent only the caller may write, only
    // the caller (or root) made it so.
    let mut why = Vec::new();
    for dir in candidates(uid, env, &run_user) {
        match private(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.1 => why.push(e.0),
            Err(e) => return Err(e.0),
        }
    }
    // TMPDIR first, then /tmp itself: a TMPDIR the user cannot write (or one that differs
    // between hosts) must not cost the protections that need state.
    for tmp in [env.tmp.as_path(), Path::new("/tmp")] {
        match in_tmp(uid, tmp) {
            Ok(d) => return Ok(d),
            Err(e) => why.push(format!("{}: {e}", crate::escape::path(tmp))),
        }
    }
    Err(format!(
        "no private directory for the sandbox's state: XDG_RUNTIME_DIR and HOME name none of \
         this user's, and none could be made in the temporary directory ({}); set \
         XDG_RUNTIME_DIR to a directory of yours with mode 0700",
        why.join("; ")
    ))
}

/// The state directory of the first candidate that applies before the last resort (`None`:
/// none does).
#[cfg(test)]
fn chosen(uid: u32, env: &Env, run_user: &Path) -> Option<PathBuf> {
    candidates(uid, env, run_user).next()
}

/// The candidates before the last resort that apply, in order. Lazy: the cache directory is
/// created (when missing under a `HOME` of the user's) only when every earlier one failed.
fn candidates<'a>(
    uid: u32,
    env: &'a Env,
    run_user: &'a Path,
) -> impl Iterator<Item = PathBuf> + 'a {
    // Root's runtime directory is /run itself (a machine or container without one, or where
    // others may write it, goes on to the candidates below).
    let root = (uid == 0 && owned_parent(Path::new("/run"), 0, false))
        .then(|| PathBuf::from("/run/sandbox"));
    let runtime = env
        .runtime
        .iter()
        .map(PathBuf::as_path)
        .chain(std::iter::once(run_user))
        .filter(move |p| owned_parent(p, uid, true))
        .map(|r| r.join("sandbox"));
    let cache = std::iter::once(()).filter_map(move |()| {
        let cache = env
            .cache
            .clone()
            .or_else(|| env.home.as_ref().map(|h| h.join(".cache")))?;
        let usable = owned_parent(&cache, uid, false)
            || (cache.symlink_metadata().is_err()
                && cache.parent().is_some_and(|h| owned_parent(h, uid, false))
                && std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&cache)
                    .is_ok());
        usable.then(|| cache.join("sandbox"))
    });
    root.into_iter().chain(runtime).chain(cache)
}

/// The last resort: a directory of the caller's in the shared temporary directory `tmp`,
/// whatever names other users took there.
fn in_tmp(uid: u32, tmp: &Path) -> std::io::Result<PathBuf> {
    let plain = tmp.join(format!("sandbox-{uid}"));
    if private(&plain).is_ok() {
        return Ok(plain);
    }
    // Taken by another user (or made unusable): the first of ours with a suffix, else a new
    // one. Made by `mkdtemp`, a name cannot be prepared in advance.
    let prefix = format!("sandbox-{uid}.");
    let mut ours: Vec<PathBuf> = std::fs::read_dir(tmp)?
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(|e| e.path())
        .collect();
    ours.sort();
    if let Some(d) = ours.into_iter().find(|d| private(d).is_ok()) {
        return Ok(d);
    }
    let made = tempfile::Builder::new()
        .prefix(&prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(tmp)?
        .keep();
    private(&made)?;
    Ok(made)
}

/// Creates `dir` with mode 0700 when missing, then checks it: a directory, not a symlink, the
/// caller's, mode exactly 0700.
fn private(dir: &Path) -> Result<(), Refused> {
    let refused = |why: String| {
        Refused(
            format!(
                "refusing to use {} as the sandbox's private directory: {why}; remove it (or \
                 set XDG_RUNTIME_DIR to a directory of yours with mode 0700)",
                crate::escape::path(dir)
            ),
            false,
        )
    };
    let created = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => {
            return Err(Refused(
                format!("{} cannot be created: {e}", crate::escape::path(dir)),
                true,
            ))
        }
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| match e.raw_os_error() {
            // O_DIRECTORY answers ENOTDIR for a symlink too: said as what it is.
            Some(libc::ELOOP | libc::ENOTDIR) if dir.is_symlink() => {
                refused("it is a symlink".into())
            }
            Some(libc::ENOTDIR) => refused("it is not a directory".into()),
            _ => refused(format!("cannot open it: {e}")),
        })?;
    let inspect = |f: &std::fs::File| {
        f.metadata()
            .map_err(|e| refused(format!("cannot inspect it: {e}")))
    };
    let mut m = inspect(&f)?;
    // The umask may have taken bits away: what this host made gets exactly 0700. Only then is
    // the mode set: inside a contained sandbox the outer supervisor makes `fchmod` for the job,
    // and it refuses a process that made itself non-dumpable (as this one does), so a call
    // that changes nothing would make the run fail.
    if created && m.mode() & 0o7777 != 0o700 {
        f.set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| refused(format!("cannot set its mode: {e}")))?;
        m = inspect(&f)?;
    }
    let uid = crate::sys::euid();
    if m.uid() != uid {
        return Err(refused(format!("it belongs to uid {}, not {uid}", m.uid())));
    }
    if m.mode() & 0o777 != 0o700 {
        return Err(refused(format!(
            "its mode is {:o}, not 700",
            m.mode() & 0o777
        )));
    }
    Ok(())
}

impl From<Refused> for std::io::Error {
    fn from(r: Refused) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, r.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_or_an_open_mode_is_refused_and_a_new_directory_is_0700() {
        let t = tempfile::tempdir().unwrap();
        let made = t.path().join("new");
        private(&made).unwrap();
        let m = std::fs::symlink_metadata(&made).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&made, &link).unwrap();
        let e = private(&link).unwrap_err().to_string();
        assert!(e.contains("symlink") && e.contains("link"), "{e}");
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = private(&made).unwrap_err().to_string();
        assert!(e.contains("mode is 755"), "{e}");
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(private(&file).is_err());
    }

    #[test]
    fn the_runtime_directory_comes_first_then_the_cache_and_hostile_values_are_skipped() {
        let env = Env::default();
        assert_eq!(
            chosen(0, &env, Path::new("/nonexistent")).unwrap(),
            Path::new("/run/sandbox")
        );
        // The other candidates belong to another user than this test's: chowned, as root.
        if crate::sys::euid() != 0 {
            return;
        }
        let uid = 65534;
        let t = tempfile::tempdir().unwrap();
        let mk = |name: &str, mode: u32, owner: u32| {
            let p = t.path().join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            std::os::unix::fs::chown(&p, Some(owner), None).unwrap();
            p
        };
        let run = mk("run", 0o700, uid);
        let open_run = mk("open-run", 0o755, uid);
        let roots_run = mk("roots-run", 0o700, 0);
        let home = mk("home", 0o755, uid);
        let none = Path::new("/nonexistent/run");
        let with = |runtime: Option<&Path>, home: Option<&Path>| Env {
            runtime: runtime.map(Path::to_path_buf),
            home: home.map(Path::to_path_buf),
            ..Env::default()
        };
        let pick = |e: &Env| chosen(uid, e, none);
        assert_eq!(
            pick(&with(Some(&run), Some(&home))),
            Some(run.join("sandbox"))
        );
        // Without a runtime directory: the cache under HOME, made 0700 when missing (by this
        // test's root: handed to the user as its own creation would be).
        assert_eq!(
            pick(&with(None, Some(&home))),
            Some(home.join(".cache/sandbox"))
        );
        let cache = std::fs::symlink_metadata(home.join(".cache")).unwrap();
        assert_eq!(cache.mode() & 0o777, 0o700);
        std::os::unix::fs::chown(home.join(".cache"), Some(uid), None).unwrap();
        // A runtime directory others may enter, another user's, a file, a symlink to a good
        // one, a missing one: skipped for the cache.
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&run, &link).unwrap();
        for bad in [
            &open_run,
            &roots_run,
            &file,
            &link,
            &t.path().join("missing"),
        ] {
            assert_eq!(
                pick(&with(Some(bad), Some(&home))),
                Some(home.join(".cache/sandbox")),
                "{bad:?}"
            );
        }
        // A HOME that is not the user's, or is missing (`/nonexistent`): the last resort.
        assert_eq!(pick(&with(None, Some(&roots_run))), None);
        assert_eq!(pick(&with(None, Some(Path::new("/nonexistent")))), None);
        assert_eq!(pick(&with(None, None)), None);
        // Relative and empty values count as unset; a newline is only a character of a name.
        let var = |v: &str| absolute(Some(v.into()));
        assert_eq!(var(""), None);
        assert_eq!(var("run/user/1"), None);
        assert_eq!(var("./run"), None);
        assert_eq!(var("/run/user/1\n"), Some(PathBuf::from("/run/user/1\n")));
        assert_eq!(absolute(None), None);
    }

    #[test]
    fn the_last_resort_skips_names_another_user_took() {
        if crate::sys::euid() != 0 {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let taken = t.path().join("sandbox-0");
        std::fs::create_dir(&taken).unwrap();
        std::os::unix::fs::chown(&taken, Some(65534), Some(65534)).unwrap();
        let got = in_tmp(0, t.path()).unwrap();
        let name = got.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("sandbox-0."), "{got:?}");
        assert_eq!(in_tmp(0, t.path()).unwrap(), got, "found again");
        // Control: when the name is free it is the one used.
        let free = tempfile::tempdir().unwrap();
        assert_eq!(
            in_tmp(0, free.path()).unwrap(),
            free.path().join("sandbox-0")
        );
    }
}
