//! The job's home: where `HOME` points and what survives between commands.
//!
//! Three modes, chosen per request (`home`):
//!
//! - `persistent` (the default of exec requests): one directory per user and workspace, kept
//!   between commands and sessions, writable by the job, never the user's real home. Package managers'
//!   caches live there (`CARGO_HOME`, the npm and pip caches, `GOPATH`/`GOCACHE`,
//!   `XDG_CACHE_HOME`), so `cargo fetch` with the network and `cargo test` without it work as
//!   two commands. Git gets the user's identity (`user.name`, `user.email` of the real global
//!   configuration, nothing else of it) through `GIT_AUTHOR_*`/`GIT_COMMITTER_*`.
//! - `private`: `HOME=/tmp`, the job's private temporary directory (nothing survives).
//! - `real`: the host's own `HOME`, readable only (what `sandbox run` always gave).
//!
//! The persistent home is shared by every job of the user in the same workspace, so one job
//! can leave files there for the next. What a later program would read as configuration that runs
//! commands is kept out of play two ways: the tools that can be told to read no user
//! configuration are told so by variable (git's global and npm's user configuration name
//! empty files beside the home, [`EMPTY_CONFIGS`]; pip's configuration files, the Go
//! environment file and Python's user site are switched off, [`PINS`]),
//! and the start-up and configuration files of the others (every Debian shell's,
//! [`SHELL_FILES`]; cargo's configuration, node's global module folders..., [`PLANTED`]) are
//! removed before every job.
//! docs/security.md names what is left.
//!
//! Where: `$XDG_DATA_HOME/sandbox/homes/NAME-HASH`, else
//! `$HOME/.local/share/sandbox/homes/NAME-HASH` (the host's variables; each used only when
//! absolute, and the parent only when it is the caller's and no other user may write it), else
//! `homes/NAME-HASH` in the per-user state directory (module `state_dir`; uid 65534 with
//! `HOME=/nonexistent` gets `/tmp/sandbox-65534/homes/...`, which lasts until the temporary
//! directory is cleaned). NAME is the workspace's last component and HASH 16 hex digits of the
//! SHA-256 of its canonical path ([`workspace_key`]).
//!
//! One per workspace, not per user: the package caches are read as code by the next build
//! (`~/.cargo/registry/src`, pip's and npm's caches, shell start-up files no deny list can
//! name in full), so a job of one project could plant code that another project's job ran. A
//! job cannot choose its workspace (the caller does), so a home per workspace keeps what one
//! project's jobs write out of every other project's; the price is a cache per project (a
//! first `cargo fetch` in each).

use serde::{Deserialize, Serialize};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

/// Which home a job gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The sandbox home of the user and the workspace, kept between commands, writable.
    #[default]
    Persistent,
    /// `HOME=/tmp`: the job's private temporary directory.
    Private,
    /// The host's own `HOME`, read-only.
    Real,
}

impl Mode {
    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Persistent => "persistent",
            Mode::Private => "private",
            Mode::Real => "real",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "persistent" => Ok(Mode::Persistent),
            "private" => Ok(Mode::Private),
            "real" => Ok(Mode::Real),
            _ => Err(format!(
                "unknown home `{}` (persistent, private or real)",
                s.escape_debug()
            )),
        }
    }
}

/// The home a job was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    /// The mode.
    pub mode: Mode,
    /// The directory `HOME` names.
    pub path: PathBuf,
}

/// Variables that name, for a tool's user configuration, an empty file the host keeps beside
/// the home (in its parent, which no job may write), each with why: the persistent home is
/// writable by every job of the user, and each of these files can name a command the tool
/// runs (git aliases, `core.pager`, `core.fsmonitor`; npm scripts' shell). Not `/dev/null`:
/// `git config --global` replaces its file by renaming a lock file over it, which would
/// replace the device itself wherever the job could write `/dev`.
pub const EMPTY_CONFIGS: &[(&str, &str, &str)] = &[
    (
        "GIT_CONFIG_GLOBAL",
        "gitconfig",
        "git's global configuration (aliases, core.pager, core.fsmonitor run commands)",
    ),
    (
        "npm_config_userconfig",
        "npmrc",
        "npm's user configuration (script-shell, node-options, git)",
    ),
];

/// Variables that tell a tool to read no configuration from the home, each with why: pip's
/// index and build options, `GOFLAGS=-toolexec`, `.pth` files in the user site.
pub const PINS: &[(&str, &str, &str)] = &[
    (
        "PIP_CONFIG_FILE",
        "/dev/null",
        "pip's configuration files (/dev/null: pip reads none)",
    ),
    (
        "GOENV",
        "off",
        "the Go environment file (GOFLAGS=-toolexec runs a command)",
    ),
    (
        "PYTHONNOUSERSITE",
        "1",
        "Python's user site, whose .pth files run at every start",
    ),
];

/// The start-up and configuration files of every shell Debian packages, by shell: removed from
/// the persistent home before every job, so that what one job writes there runs in no later
/// job's shell (a `zsh -lc` ran a `~/.zlogin` another project's job had planted). Shells that
/// read a directory (fish, elvish, nushell, xonsh, oils, yash) lose the whole directory.
/// The variables that point a shell elsewhere (`ZDOTDIR`, `ENV`, `BASH_ENV`, `XONSHRC`...)
/// are refused in requests (module `env`). A test holds the list to Debian's shells.
pub const SHELL_FILES: &[(&str, &[&str])] = &[
    (
        "bash",
        &[
            ".profile",
            ".bash_profile",
            ".bash_login",
            ".bashrc",
            ".bash_logout",
            ".inputrc",
        ],
    ),
    (
        "zsh",
        &[".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout"],
    ),
    (
        "fish",
        &[
            ".config/fish",
            ".local/share/fish/vendor_conf.d",
            ".local/share/fish/vendor_functions.d",
            ".local/share/fish/vendor_completions.d",
        ],
    ),
    ("ksh", &[".profile", ".kshrc"]),
    ("mksh", &[".profile", ".mkshrc"]),
    ("dash", &[".profile"]),
    ("posh", &[".profile"]),
    ("busybox", &[".profile"]),
    (
        "tcsh",
        &[
            ".tcshrc", ".cshrc", ".login", ".logout", ".cshdirs", ".editrc",
        ],
    ),
    ("csh", &[".cshrc", ".login", ".logout"]),
    ("yash", &[".yashrc", ".yash_profile", ".config/yash"]),
    ("rc", &[".rcrc"]),
    ("es", &[".esrc"]),
    ("sash", &[".aliasrc"]),
    ("elvish", &[".config/elvish", ".elvish"]),
    ("nushell", &[".config/nushell"]),
    ("xonsh", &[".xonshrc", ".config/xonsh"]),
    ("oils", &[".config/oils", ".config/oil"]),
];

/// Files and directories below the home removed before every job besides the shells' own
/// ([`SHELL_FILES`]): configuration that names commands for tools that have no variable to
/// ignore it.
pub const PLANTED: &[&str] = &[
    ".gitconfig",
    ".config/git",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".node_modules",
    ".node_libraries",
    ".cargo/config",
    ".cargo/config.toml",
    ".config/pip",
    ".pip",
    ".pydistutils.cfg",
    ".gemrc",
    ".m2/settings.xml",
    ".ssh",
    ".curlrc",
    ".wgetrc",
];

/// Every path removed before a job: the shells' files, then [`PLANTED`] (each once).
pub fn planted() -> impl Iterator<Item = &'static str> {
    let mut seen = std::collections::BTreeSet::new();
    SHELL_FILES
        .iter()
        .flat_map(|(_, files)| files.iter().copied())
        .chain(PLANTED.iter().copied())
        .filter(move |p| seen.insert(*p))
}

/// Why no persistent home could be made for a job, said in its result: every place for one
/// is outside what may be written here (inside another sandbox). The job then has the private
/// `HOME=/tmp`, as `"home": "private"` gives.
pub(crate) const NOWHERE: &str = "sandbox: warning: no persistent home can be made here (every \
     place for one is read-only or outside the writable places, as inside another sandbox): \
     HOME is the job's private /tmp, and nothing in it outlasts the command";

/// The home for `mode` of a job whose workspace is `workspace` (`None` for `private`, which
/// keeps `HOME=/tmp`, and for a persistent home that can be made nowhere here: [`NOWHERE`]),
/// made when missing.
pub(crate) fn resolve(mode: Mode, workspace: &Path) -> Result<Option<Home>, String> {
    match mode {
        Mode::Private => Ok(None),
        Mode::Real => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute() && h.is_dir())
                .ok_or_else(|| {
                    "the host has no absolute HOME that is a directory; use \"persistent\" or \
                     \"private\""
                        .to_string()
                })?;
            Ok(Some(Home { mode, path: home }))
        }
        Mode::Persistent => {
            static MADE: OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, PathBuf>>> =
                OnceLock::new();
            let made = MADE.get_or_init(Default::default);
            if let Some(path) = made
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(workspace)
            {
                return Ok(Some(Home {
                    mode,
                    path: path.clone(),
                }));
            }
            let Some(path) = persistent_home(crate::sys::euid(), &workspace_key(workspace))? else {
                return Ok(None);
            };
            made.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(workspace.to_path_buf(), path.clone());
            Ok(Some(Home { mode, path }))
        }
    }
}

/// The name of `workspace`'s home among the homes: its last component (letters, digits,
/// `.`, `_` and `-`, at most 40; `root` for `/`) and 16 hex digits of the SHA-256 of its
/// canonical path, so two workspaces never share a home however alike their names.
pub fn workspace_key(workspace: &Path) -> String {
    use sha2::{Digest, Sha256};
    let path = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let digest = Sha256::digest(path.as_os_str().as_encoded_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name: String = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_string())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(40)
        .collect();
    let name = match name.trim_start_matches('.') {
        "" => "workspace",
        n => n,
    };
    format!("{name}-{hash}")
}

/// Finds (and makes) `uid`'s persistent home named `key`: in the first candidate directory of
/// homes that is the user's and can take it. A candidate where the directory cannot be made
/// (read-only, or not writable here: inside another sandbox, the user's data directory is
/// outside its writable places) is passed over for the next, the per-user state directory
/// last (`None` when it cannot take it either); one that exists but is not private is
/// refused, never passed over.
fn persistent_home(uid: u32, key: &str) -> Result<Option<PathBuf>, String> {
    let abs = |k: &str| {
        std::env::var_os(k)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    // Each candidate with the directory that must exist already and be the caller's: a HOME
    // that does not exist (`/nonexistent`) is never created.
    let xdg = abs("XDG_DATA_HOME").map(|d| {
        let anchor = d.parent().map_or_else(|| d.clone(), Path::to_path_buf);
        (d, anchor)
    });
    let home = abs("HOME").map(|h| (h.join(".local/share"), h));
    for (data, anchor) in [xdg, home].into_iter().flatten() {
        if !usable_parent(&data, &anchor, uid) {
            continue;
        }
        let dir = data.join("sandbox");
        let homes = dir.join("homes");
        let home = homes.join(key);
        let mut passed_over = false;
        for d in [&dir, &homes, &home] {
            match private_dir(d, uid) {
                Ok(()) => {}
                Err(Unusable::Create(e)) if not_writable_here(&e) => {
                    passed_over = true;
                    break;
                }
                Err(u) => return Err(u.say(d)),
            }
        }
        if !passed_over {
            return Ok(Some(home));
        }
    }
    let home = crate::state_dir::sub("homes")?.join(key);
    match private_dir(&home, uid) {
        Ok(()) => Ok(Some(home)),
        Err(Unusable::Create(e)) if not_writable_here(&e) => Ok(None),
        Err(u) => Err(u.say(&home)),
    }
}

/// Why a directory cannot be a home: it could not be made, or it is not private.
enum Unusable {
    Create(std::io::Error),
    Unsafe(String),
}

impl Unusable {
    /// The refusal naming `dir`.
    fn say(&self, dir: &Path) -> String {
        let why = match self {
            Unusable::Create(e) => format!("cannot create it: {e}"),
            Unusable::Unsafe(why) => why.clone(),
        };
        format!(
            "refusing {} as the sandbox's home: {why}; remove it, or use \"private\"",
            crate::escape::path(dir)
        )
    }
}

/// Whether making a directory failed because this place may not be written here.
fn not_writable_here(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES | libc::EROFS | libc::EPERM)
    )
}

/// Whether `data` is a directory of `uid` that no other user may write, made (mode 0700)
/// when missing below `anchor`, which must exist and be such a directory itself.
fn usable_parent(data: &Path, anchor: &Path, uid: u32) -> bool {
    let owned = |p: &Path| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0)
    };
    if owned(data) {
        return true;
    }
    owned(anchor)
        && data.starts_with(anchor)
        && std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data)
            .is_ok()
        && owned(data)
}

/// Creates `dir` with mode 0700 when missing, then checks it is a directory of `uid` (not a
/// symlink) that nobody else may enter; why not, as a value.
fn private_dir(dir: &Path, uid: u32) -> Result<(), Unusable> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Unusable::Create(e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| Unusable::Unsafe(e.to_string()))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(Unusable::Unsafe(format!(
            "it is not a directory of uid {uid} that only it may enter"
        )));
    }
    Ok(())
}

/// Before a job: the home and its parent are still private (a job of an earlier tier could
/// have changed their mode), and the files of [`planted`] are gone.
pub(crate) fn prepare(home: &Home) -> Result<(), String> {
    if home.mode != Mode::Persistent {
        return Ok(());
    }
    let uid = crate::sys::euid();
    for dir in [Some(home.path.as_path()), home.path.parent()]
        .into_iter()
        .flatten()
    {
        let m = std::fs::symlink_metadata(dir)
            .map_err(|e| format!("the sandbox's home {}: {e}", crate::escape::path(dir)))?;
        if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
            return Err(format!(
                "the sandbox's home {} is no longer a private directory of uid {uid} (mode \
                 {:o}); restore mode 700, or use \"private\"",
                crate::escape::path(dir),
                m.mode() & 0o7777
            ));
        }
    }
    // The empty configuration files the pinned variables name: made again when a job of a
    // tier without the view changed them.
    let beside = home.path.parent().unwrap_or(&home.path);
    for (_, file, _) in EMPTY_CONFIGS {
        let p = beside.join(file);
        empty_file(&p).map_err(|e| {
            format!(
                "cannot keep {} empty for the job: {e}; remove it, or use \"private\"",
                crate::escape::path(&p)
            )
        })?;
    }
    for rel in planted() {
        remove_planted(&home.path, rel).map_err(|e| {
            format!(
                "cannot remove {} from the sandbox's home before the job (a file that would \
                 run commands): {e}; remove it, or use \"private\"",
                crate::escape::path(&home.path.join(rel))
            )
        })?;
    }
    Ok(())
}

/// Makes `p` an empty regular file of mode 0444 unless it is one already (one lookup per job).
/// Jobs of one user start at once (`serve`, concurrent clients): another job's host may make
/// or remove the same file between the lookup and the creation, so a lost race is looked at
/// again rather than failing the job.
fn empty_file(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut last = None;
    for _ in 0..3 {
        let gone = |r: std::io::Result<()>| match r {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_file() && m.len() == 0 => return Ok(()),
            Ok(m) if m.is_dir() => gone(std::fs::remove_dir_all(p))?,
            // Replaced by an empty file in one rename: the name never goes missing for a
            // concurrent job whose view binds it read-only at that moment (removing it first
            // failed such a job's mounts with ENOENT now and then).
            Ok(_) => {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let tmp = p.with_file_name(crate::aside::name(&name.unwrap_or_default(), "empty"));
                let made = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o444)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&tmp)
                    .and_then(|_| std::fs::rename(&tmp, p));
                if made.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                made?;
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .custom_flags(libc::O_NOFOLLOW)
            .open(p)
        {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AlreadyExists)))
}

/// Removes `rel` (a file or a directory tree) below `home` without following a symlink on the
/// way: the host runs this unconfined, and a job may have replaced `.config` or `.cargo` with a
/// link to anywhere (`.config` -> `/etc` would otherwise remove `/etc/git`). Each directory on
/// the way is opened with `O_NOFOLLOW` and the next name looked up through that descriptor
/// (`/proc/self/fd/N/name`), so a link swapped in meanwhile is not followed either; a link
/// where a directory was expected is removed itself (it is the job's, and holds nothing).
fn remove_planted(home: &Path, rel: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let open_dir = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
            .open(p)
    };
    let via = |dir: &std::fs::File, name: &str| {
        PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name)
    };
    let mut names: Vec<&str> = rel.split('/').collect();
    let last = names.pop().unwrap_or(rel);
    let mut dir = open_dir(home)?;
    for name in names {
        let next = via(&dir, name);
        match std::fs::symlink_metadata(&next) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
            Ok(m) if m.file_type().is_symlink() => return std::fs::remove_file(&next),
            Ok(m) if !m.is_dir() => return Ok(()),
            Ok(_) => {}
        }
        dir = match open_dir(&next) {
            Ok(d) => d,
            // Swapped for a link or a file since the look: not followed, gone next time.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                return std::fs::remove_file(&next)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
    }
    let target = via(&dir, last);
    match std::fs::symlink_metadata(&target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        // remove_dir_all does not follow links inside the tree.
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&target),
        Ok(_) => std::fs::remove_file(&target),
    }
}

/// The variables a job with `home` gets: `HOME`, the caches below it and [`PINS`] for the
/// persistent home, `HOME` alone for the real one. The caller's own `env` entries win: they
/// are left out here.
pub(crate) fn variables(home: &Home) -> Vec<(String, String)> {
    let h = home.path.display().to_string();
    let mut out = vec![("HOME".to_string(), h.clone())];
    if home.mode != Mode::Persistent {
        return out;
    }
    for (k, rel) in [
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("CARGO_HOME", ".cargo"),
        ("npm_config_cache", ".npm"),
        ("PIP_CACHE_DIR", ".cache/pip"),
        ("GOPATH", "go"),
        ("GOMODCACHE", "go/pkg/mod"),
        ("GOCACHE", ".cache/go-build"),
    ] {
        out.push((k.to_string(), format!("{h}/{rel}")));
    }
    let beside = home.path.parent().unwrap_or(&home.path);
    for (k, file, _) in EMPTY_CONFIGS {
        out.push((k.to_string(), beside.join(file).display().to_string()));
    }
    for (k, v, _) in PINS {
        out.push((k.to_string(), v.to_string()));
    }
    if let Some((name, email)) = identity() {
        for k in ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"] {
            out.push((k.to_string(), name.clone()));
        }
        for k in ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"] {
            out.push((k.to_string(), email.clone()));
        }
    }
    out
}

/// Gives a validated job `home`: its [`variables`] on top of the scrubbed `env`, except the
/// names the caller set itself (`caller`), and the persistent home among the writable places
/// (`writable`: the request's writable paths; Landlock's rule and the view's writable binds
/// follow from them).
pub(crate) fn apply(
    home: &Home,
    env: &mut Vec<(String, String)>,
    caller: &std::collections::BTreeMap<String, String>,
    writable: &mut Vec<PathBuf>,
) {
    for (k, v) in variables(home) {
        if caller.contains_key(&k) {
            continue;
        }
        match env.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => env.push((k, v)),
        }
    }
    env.sort();
    if home.mode == Mode::Persistent && !writable.contains(&home.path) {
        writable.push(home.path.clone());
    }
}

/// The user's git identity (`user.name`, `user.email`), read once from the host's global
/// configuration files (`$XDG_CONFIG_HOME/git/config`, then `~/.gitconfig`, the later
/// winning as git reads them); both or nothing. The files are parsed here rather than by
/// running git, which would cost every one-shot request a process; `include` is not followed.
fn identity() -> Option<(String, String)> {
    static ID: OnceLock<Option<(String, String)>> = OnceLock::new();
    ID.get_or_init(|| {
        let abs = |k: &str| {
            std::env::var_os(k)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let home = abs("HOME");
        let xdg = abs("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
        let files = [
            xdg.map(|x| x.join("git/config")),
            home.map(|h| h.join(".gitconfig")),
        ];
        let (mut name, mut email) = (None, None);
        for f in files.into_iter().flatten() {
            if let Ok(text) = std::fs::read_to_string(&f) {
                let (n, e) = parse_identity(&text);
                name = n.or(name);
                email = e.or(email);
            }
        }
        Some((name?, email?))
    })
    .clone()
}

/// `user.name` and `user.email` of one git configuration file's text (the last of each);
/// values with control characters are ignored.
fn parse_identity(text: &str) -> (Option<String>, Option<String>) {
    let (mut name, mut email) = (None, None);
    let mut in_user = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(section) = line.strip_prefix('[') {
            let head = section.split(']').next().unwrap_or("").trim();
            in_user = head.eq_ignore_ascii_case("user");
            continue;
        }
        if !in_user {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value)
            .to_string();
        if value.is_empty() || value.chars().any(char::is_control) {
            continue;
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(value),
            "email" => email = Some(value),
            _ => {}
        }
    }
    (name, email)
}

#[cfg(test)]
mod shell_tests {
    /// The shells Debian 12 packages (their `/etc/shells` entries), each with its files.
    #[test]
    fn every_debian_shell_has_its_startup_files_listed() {
        for shell in [
            "bash", "dash", "zsh", "fish", "ksh", "mksh", "posh", "busybox", "tcsh", "csh", "yash",
            "rc", "es", "sash", "elvish", "nushell", "xonsh", "oils",
        ] {
            assert!(
                super::SHELL_FILES
                    .iter()
                    .any(|(s, f)| *s == shell && !f.is_empty()),
                "{shell}"
            );
        }
        let all: Vec<&str> = super::planted().collect();
        for f in [
            ".zlogin",
            ".zlogout",
            ".config/fish",
            ".tcshrc",
            ".bashrc",
            ".ssh",
        ] {
            assert!(all.contains(&f), "{f}");
        }
        let mut dedup = all.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), all.len(), "each path once");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_hostile_names_are_refused() {
        for m in [Mode::Persistent, Mode::Private, Mode::Real] {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        for bad in [
            "",
            "Persistent",
            "persistent\n",
            "real\0",
            "../home",
            "/root",
        ] {
            assert!(bad.parse::<Mode>().is_err(), "{bad:?}");
        }
        assert_eq!(Mode::default(), Mode::Persistent);
    }

    #[test]
    fn the_identity_is_user_name_and_email_only() {
        let text = "[core]\n\tpager = evil\n[user]\n\tname = \"A B\"\n\temail = a@b.c\n\
                    \tsigningkey = K\n[alias]\n\tname = x\n[User]\n\tEmail = d@e.f\n";
        assert_eq!(
            parse_identity(text),
            (Some("A B".into()), Some("d@e.f".into()))
        );
        // A control character in a value: ignored.
        assert_eq!(
            parse_identity("[user]\nname = a\u{1b}b\nemail = x@y\n"),
            (None, Some("x@y".into()))
        );
        assert_eq!(parse_identity(""), (None, None));
    }

    /// A job that replaced `.config` or `.cargo` with a link out of the home gets the link
    /// removed, never what it points to.
    #[test]
    fn a_changed_configuration_file_is_emptied_in_place_and_a_link_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("gitconfig");
        std::fs::write(&f, "[core]\n\tfsmonitor = evil\n").unwrap();
        empty_file(&f).unwrap();
        let m = std::fs::symlink_metadata(&f).unwrap();
        assert!(m.is_file() && m.len() == 0);
        assert_eq!(m.permissions().mode() & 0o777, 0o444);
        // A link is replaced itself; what it pointed to is left as it was.
        let outside = t.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let _ = std::fs::remove_file(&f);
        std::os::unix::fs::symlink(&outside, &f).unwrap();
        empty_file(&f).unwrap();
        assert!(std::fs::symlink_metadata(&f).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        // Nothing written aside is left beside it.
        let left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn prepare_follows_no_link_out_of_the_home() {
        let t = tempfile::tempdir().unwrap();
        let uid = crate::sys::euid();
        let parent = t.path().join("sandbox");
        private_dir(&parent, uid)
            .map_err(|u| u.say(&parent))
            .unwrap();
        let path = parent.join("home");
        private_dir(&path, uid).map_err(|u| u.say(&path)).unwrap();
        let outside = t.path().join("etc");
        std::fs::create_dir_all(outside.join("git")).unwrap();
        std::fs::write(outside.join("git/config"), "x").unwrap();
        std::fs::write(outside.join("config.toml"), "x").unwrap();
        std::fs::write(outside.join("settings.xml"), "x").unwrap();
        for link in [".config", ".cargo", ".m2"] {
            std::os::unix::fs::symlink(&outside, path.join(link)).unwrap();
        }
        // Control: a plain removal through the link reaches the directory outside.
        assert!(path.join(".config/git").is_dir());
        let home = Home {
            mode: Mode::Persistent,
            path: path.clone(),
        };
        prepare(&home).unwrap();
        for kept in ["git/config", "config.toml", "settings.xml"] {
            assert!(
                outside.join(kept).exists(),
                "{kept} was removed through a link"
            );
        }
        for link in [".config", ".cargo", ".m2"] {
            assert!(path.join(link).symlink_metadata().is_err(), "{link} kept");
        }
    }

    #[test]
    fn prepare_removes_planted_files_and_refuses_an_open_home() {
        let t = tempfile::tempdir().unwrap();
        let parent = t.path().join("sandbox");
        let uid = crate::sys::euid();
        private_dir(&parent, uid)
            .map_err(|u| u.say(&parent))
            .unwrap();
        let path = parent.join("home");
        private_dir(&path, uid).map_err(|u| u.say(&path)).unwrap();
        let home = Home {
            mode: Mode::Persistent,
            path: path.clone(),
        };
        std::fs::create_dir_all(path.join(".cargo")).unwrap();
        std::fs::write(path.join(".cargo/config.toml"), "[target.x]\nrunner='x'").unwrap();
        std::fs::write(path.join(".bashrc"), "touch /tmp/x").unwrap();
        std::fs::create_dir_all(path.join(".config/git")).unwrap();
        std::fs::write(path.join("keep"), "").unwrap();
        std::fs::write(parent.join("gitconfig"), "[alias]\n\tst = !true\n").unwrap();
        prepare(&home).unwrap();
        for (_, file, _) in EMPTY_CONFIGS {
            let m = std::fs::symlink_metadata(parent.join(file)).unwrap();
            assert!(m.is_file() && m.len() == 0, "{file}");
        }
        assert!(!path.join(".cargo/config.toml").exists());
        assert!(!path.join(".bashrc").exists());
        assert!(!path.join(".config/git").exists());
        assert!(path.join(".cargo").is_dir() && path.join("keep").exists());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare(&home).unwrap_err();
        assert!(e.contains("no longer a private directory"), "{e}");
    }
}
