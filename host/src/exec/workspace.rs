//! The broad-workspace check: a workspace the program may write that is `/`, the caller's home
//! directory, a parent of either, or a directory holding a credential path is refused, because
//! what a program writes there outlives the run and reaches outside the sandbox (start-up
//! files such as `~/.bashrc`, systemd user units, credentials, and as root `/sys` and
//! `cgroup.procs`). An explicitly named workspace may still be one of these with
//! `allow_broad_workspace` (`--allow-broad-workspace`), and the result says so in `warnings`;
//! the default workspace (the working directory) never may: it is chosen by where a command
//! happened to start, which is exactly how the home directory ended up writable.
//!
//! Only a workspace that exists is checked: one with the Landlock layer on (with it off
//! nothing is confined, and the workspace grants nothing), and the default one only for
//! profiles whose filter lets a program create files (the others get no workspace at all, so a
//! read-only profile keeps working from the home directory).

use super::request::{Audience, PathRules, Refusal};
use crate::landlock::Mode;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why `dir` is too broad to be a workspace, or `None` when it is not. `homes` are the
/// caller's home directories (its `HOME`, its passwd entry's), resolved already.
pub(crate) fn too_broad(dir: &Path, homes: &[PathBuf]) -> Option<String> {
    let dir = resolved(dir);
    if dir == Path::new("/") {
        return Some("the root directory".into());
    }
    for home in homes {
        if dir == *home {
            return Some("the caller's home directory".into());
        }
        if home.starts_with(&dir) {
            return Some(format!(
                "a parent of the caller's home directory `{}`",
                home.display()
            ));
        }
        // The credential list of the Landlock layer (what it keeps unreadable).
        if let Some(c) = crate::landlock::default_deny_read(home)
            .into_iter()
            .find(|c| c.starts_with(&dir))
        {
            return Some(format!(
                "a directory holding the credential path `{}`",
                c.display()
            ));
        }
    }
    None
}

/// `path` with symbolic links and `..` resolved where it exists (`/root/..` is `/`), as given
/// otherwise.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A world-writable directory with the sticky bit (`/tmp`, `/var/tmp`): a service account's
/// `HOME=/tmp` is no home to protect (every user may already create files there, and a job's
/// `/tmp` is private), so it does not make the directory a broad workspace.
fn shared_temporary(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o1002 == 0o1002)
}

/// The caller's home directories: `HOME` when absolute, and the passwd entry's of the
/// effective uid (they differ under `sudo -E` or a `HOME` set for one command).
pub(crate) fn homes() -> Vec<PathBuf> {
    // The passwd entry is looked up once per process (a serve host would otherwise read the
    // passwd database for every job); HOME is read each time, as the credential list is.
    static PASSWD_HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    let passwd = PASSWD_HOME
        .get_or_init(|| crate::sys::home_dir(crate::sys::euid()).map(|h| resolved(&h)))
        .clone();
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .map(|h| resolved(&h))
        .into_iter()
        .chain(passwd)
        .filter(|h| !shared_temporary(h))
        .collect();
    homes.dedup();
    homes
}

/// Checks the workspace a job will write: `Ok(None)` when it is fine (or there is none),
/// `Ok(Some(warning))` when it is broad and the caller allowed it, else the refusal, worded
/// for `audience`. `default` is the workspace the job gets when none was named (the working
/// directory, for profiles that create files), `None` when it gets none.
pub(crate) fn check(
    rules: &PathRules,
    default: Option<&Path>,
    audience: Audience,
) -> Result<Option<String>, Refusal> {
    if rules.mode == Mode::Off {
        return Ok(None);
    }
    let (dir, named) = match (&rules.workspace, default) {
        (Some(w), _) => (w.as_path(), true),
        (None, Some(d)) => (d, false),
        (None, None) => return Ok(None),
    };
    let Some(why) = too_broad(dir, &homes()) else {
        return Ok(None);
    };
    let shown = dir.display();
    let consequence = "a program that may write there can change files that run or are read \
                       outside the sandbox (shell start-up files, systemd user units, \
                       credentials)";
    if named && rules.allow_broad_workspace {
        return Ok(Some(format!(
            "sandbox: warning: the workspace `{shown}` is {why}, allowed by {}: {consequence}",
            match audience {
                Audience::Json => "allow_broad_workspace",
                Audience::Cli => "--allow-broad-workspace",
            }
        )));
    }
    let reason = match (named, audience) {
        (true, Audience::Json) => format!(
            "`{shown}` is {why}: {consequence}; name a project directory, or set \
             allow_broad_workspace to true if this is meant"
        ),
        (true, Audience::Cli) => format!(
            "`{shown}` is {why}: {consequence}; name a project directory, or add \
             --allow-broad-workspace if this is meant"
        ),
        (false, Audience::Json) => format!(
            "none given, and the working directory `{shown}` (the default workspace) is \
             {why}: {consequence}; set workspace (or cwd) to a project directory"
        ),
        (false, Audience::Cli) => format!(
            "none given, and the working directory `{shown}` (the default workspace) is \
             {why}: {consequence}; pass --workspace with a project directory (or run from \
             one)"
        ),
    };
    Err(Refusal::new("workspace", reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broad_directories_are_named() {
        let homes = [PathBuf::from("/home/u")];
        for (dir, says) in [
            ("/", "the root directory"),
            ("/home/u", "the caller's home directory"),
            ("/home", "a parent of the caller's home directory"),
            (
                "/home/u/.config",
                "a directory holding the credential path `/home/u/.config/g",
            ),
            (
                "/home/u/.ssh",
                "a directory holding the credential path `/home/u/.ssh`",
            ),
            ("/home/u/.local", "a directory holding the credential path"),
        ] {
            let why = too_broad(Path::new(dir), &homes).unwrap_or_default();
            assert!(why.starts_with(says), "{dir}: {why}");
        }
        for dir in [
            "/home/u/project",
            "/home/u/.cache",
            "/home/v",
            "/tmp",
            "/srv/x",
        ] {
            assert_eq!(too_broad(Path::new(dir), &homes), None, "{dir}");
        }
    }

    #[test]
    fn a_path_through_dot_dot_is_resolved() {
        let homes = [PathBuf::from("/nonexistent-home")];
        assert_eq!(
            too_broad(Path::new("/tmp/.."), &homes).as_deref(),
            Some("the root directory")
        );
    }
}
