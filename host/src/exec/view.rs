//! The constructed view of the machine a job sees in its mount namespace (the isolated tier).
//!
//! The host's tree stays visible for reading, but nothing of it is writable by construction:
//! the whole tree is made read-only (recursively), and only the job's writable places are
//! bound back writable: the workspace and the asked writable paths, a private `/tmp` and a
//! private `/dev/shm`. Read-only mounts refuse every change of a file's content, name, mode,
//! owner, times and extended attributes (`EROFS`), which Landlock cannot (it has no rights
//! for `chmod`, `utimensat` or `setxattr`), and they hold for static programs and for root.
//!
//! `/dev` is built fresh: a small tmpfs holding the usual device nodes (bound from the host's,
//! read-only, so their owner and mode cannot be changed), the `/proc/self/fd` links, and a
//! devpts instance of its own (`newinstance`, its own `ptmx`, at most [`MAX_PTYS`]
//! terminals): the other terminals of the user are not there. The command's own terminal,
//! when it has one, reaches it as a descriptor only.
//!
//! Pathname unix sockets are not covered by read-only mounts (`connect` needs no write
//! access to the mount), so every socket bound on the host (the kernel lists them in
//! `/proc/net/unix`) that is outside the job's writable places and not named by the caller
//! is covered by `/dev/null`: `connect` and `sendto` then fail with `ECONNREFUSED`. Sockets
//! bound after the job started, or bound in another network namespace, are not covered;
//! docs/isolation.md names these gaps.
//!
//! This module only plans (pure apart from reading `/proc/net/unix` and `lstat`); the init
//! (`spawn/init.rs`) carries the plan out with raw system calls.

use super::namespaces::Mount;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Terminals one job may open in its own devpts instance (`max=`): the host's pool is
/// shared by every user (`kernel.pty.max`), and a job that opened hundreds kept others out.
pub(crate) const MAX_PTYS: u32 = 64;

/// inotify instances one job may hold (the user's own limit still applies above it): a job
/// that took all of them left the user's editors and file watchers without any.
pub(crate) const MAX_INOTIFY_INSTANCES: u32 = 32;

/// The private `/tmp`'s size and file count without a memory limit (tmpfs takes a share of
/// physical memory).
const TMP_OPTIONS: &str = "mode=1777,size=25%,nr_inodes=262144";

/// The private `/dev/shm` (POSIX shared memory and semaphores: `multiprocessing`), likewise.
const SHM_OPTIONS: &str = "mode=1777,size=10%,nr_inodes=16384";

/// The options of the private `/tmp` and `/dev/shm` for a job whose memory is `memory`: with
/// a limit, the two together hold at most that much (three quarters for `/tmp`, a quarter for
/// `/dev/shm`), so that a job cannot keep more of the machine's memory in files than in its
/// processes: where no memory cgroup holds the job, the host's watchdog sees processes, not
/// tmpfs pages (a review kept 1.3 GiB there beside a 512 MiB limit). Without one, shares of
/// physical memory.
fn tmpfs_options(memory: Option<u64>) -> (String, String) {
    match memory {
        Some(m) => {
            let kib = |b: u64| (b / 1024).max(64);
            (
                format!("mode=1777,size={}k,nr_inodes=262144", kib(m / 4 * 3)),
                format!("mode=1777,size={}k,nr_inodes=16384", kib(m / 4)),
            )
        }
        None => (TMP_OPTIONS.to_string(), SHM_OPTIONS.to_string()),
    }
}

/// The fresh `/dev` itself: a few nodes and links, then read-only.
const DEV_OPTIONS: &str = "mode=755,size=64k,nr_inodes=64";

/// Device nodes bound into the fresh `/dev` from the host's: the ones Landlock's device rules
/// name, but `ptmx`, which is the view's own devpts instance's (a link, below).
fn device_nodes() -> impl Iterator<Item = &'static str> {
    crate::landlock::DEVICES
        .iter()
        .copied()
        .filter(|n| *n != "/dev/ptmx")
}

/// Links in the fresh `/dev`: name and target.
const DEVICE_LINKS: &[(&str, &str)] = &[
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
    ("/dev/ptmx", "pts/ptmx"),
];

/// What a job's view is made of.
pub(crate) struct Inputs<'a> {
    /// The places the job may write (absolute; canonicalised here).
    pub writable: &'a [PathBuf],
    /// Directories under `/tmp` bound back into a private `/tmp`, each with whether it stays
    /// writable.
    pub exposed: &'a [(PathBuf, bool)],
    /// A private `/tmp` is mounted.
    pub private_tmp: bool,
    /// The caller is root: `/proc`'s machine-wide files are bound read-only over the fresh
    /// `/proc` (their owner is root, and root's uid maps to itself).
    pub root_caller: bool,
    /// Unix sockets the caller names as reachable (`--allow-unix-socket`).
    pub allowed_sockets: &'a [PathBuf],
    /// The deny paths' covers (module `conceal`): mounted first, so that the copies of the
    /// trees bound back later carry them.
    pub covers: &'a [Mount],
    /// The job's memory limit, bytes (`None`: none), which the private `/tmp` and `/dev/shm`
    /// stay within ([`tmpfs_options`]).
    pub memory: Option<u64>,
}

/// A job's view: the mount plan and what it hides.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// The steps, in order (the caller appends its read-only binds after them).
    pub mounts: Vec<Mount>,
    /// Host sockets covered in the view.
    pub hidden_sockets: Vec<PathBuf>,
    /// The host's tree is read-only in the view (not when a writable place is `/` itself).
    pub read_only_root: bool,
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths were checked for NUL")
}

fn c_str(s: &str) -> CString {
    CString::new(s).expect("constant without NUL")
}

/// `path` is `dir` or beneath it.
fn within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// The writable places as the view binds them: canonical, outermost only, none under the
/// fresh `/proc` or, with a private `/tmp`, under `/tmp` (those come back with the `/tmp`
/// exposures); one under `/dev` comes back in the fresh `/dev` (a file there as its
/// directory).
fn writable_places(writable: &[PathBuf], private_tmp: bool) -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = writable
        .iter()
        .filter(|w| !within(w, Path::new("/proc")))
        .filter(|w| !(private_tmp && within(w, Path::new("/tmp"))))
        // A file's directory: it is made again inside the fresh `/dev`, as a directory.
        .map(|w| {
            if within(w, Path::new("/dev")) && !w.is_dir() {
                w.parent().map_or(w.clone(), Path::to_path_buf)
            } else {
                w.clone()
            }
        })
        .collect();
    places.sort();
    places.dedup();
    let all = places.clone();
    places.retain(|p| !all.iter().any(|o| o != p && within(p, o)));
    places
}

/// Plans the view of one job.
pub(crate) fn plan(inputs: &Inputs) -> View {
    // Canonical once: the places to bind back and the sockets left reachable both use it.
    let writable: Vec<PathBuf> = inputs
        .writable
        .iter()
        .filter_map(|w| std::fs::canonicalize(w).ok())
        .collect();
    let places = writable_places(&writable, inputs.private_tmp);
    let read_only_root = !places.iter().any(|p| p == Path::new("/"));
    let mut m = inputs.covers.to_vec();
    let mut slot = 0;
    let mut take = |m: &mut Vec<Mount>, p: &Path| {
        m.push(Mount::Clone(c_path(p), slot));
        slot += 1;
        slot - 1
    };
    // Copies of what comes back later, taken before the tree is sealed: a copy keeps the
    // flags it had (a bind of a sealed mount would be sealed too).
    let exposed: Vec<(usize, &PathBuf, bool)> = inputs
        .exposed
        .iter()
        .map(|(d, w)| (take(&mut m, d), d, *w))
        .collect();
    let places: Vec<(usize, PathBuf)> = if read_only_root {
        places.into_iter().map(|p| (take(&mut m, &p), p)).collect()
    } else {
        Vec::new()
    };
    let nodes: Vec<(usize, &str)> = device_nodes()
        .filter(|n| Path::new(n).exists())
        .map(|n| (take(&mut m, Path::new(n)), n))
        .collect();
    if read_only_root {
        m.push(Mount::Seal(c_str("/"), true));
    }
    m.push(Mount::Proc(c_str("/proc")));
    m.push(Mount::Write(
        c_str("/proc/sys/user/max_inotify_instances"),
        c_str(&MAX_INOTIFY_INSTANCES.to_string()),
    ));
    if inputs.root_caller {
        // The fresh /proc has what the host's has (a kernel without SysRq has no trigger);
        // looked up once per process, not per job.
        static MACHINE_FILES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
        let files = MACHINE_FILES.get_or_init(|| {
            ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq"]
                .map(Path::new)
                .into_iter()
                .filter(|p| p.exists())
                .map(c_path)
                .collect()
        });
        m.extend(files.iter().cloned().map(Mount::ReadOnly));
    }
    let (tmp_options, shm_options) = tmpfs_options(inputs.memory);
    if inputs.private_tmp {
        m.push(Mount::Tmpfs(c_str("/tmp"), c_str(&tmp_options)));
    }
    for (slot, d, writable) in exposed {
        attach_beneath(&mut m, Path::new("/tmp"), d, slot, writable);
    }
    let (in_dev, places): (Vec<_>, Vec<_>) = places
        .into_iter()
        .partition(|(_, p)| within(p, Path::new("/dev")));
    for (slot, p) in &places {
        m.push(Mount::Attach(c_path(p), *slot, true));
    }
    // The fresh /dev.
    m.push(Mount::Tmpfs(c_str("/dev"), c_str(DEV_OPTIONS)));
    for (slot, n) in nodes {
        m.push(Mount::File(c_str(n)));
        // Read-only: writes to a device node still work, its mode and owner do not change.
        m.push(Mount::Attach(c_str(n), slot, false));
    }
    for (name, target) in DEVICE_LINKS {
        m.push(Mount::Symlink(c_str(target), c_str(name)));
    }
    m.push(Mount::Mkdir(c_str("/dev/pts")));
    m.push(Mount::Devpts(
        c_str("/dev/pts"),
        c_str(&format!(
            "newinstance,ptmxmode=0666,mode=620,max={MAX_PTYS}"
        )),
    ));
    m.push(Mount::Mkdir(c_str("/dev/shm")));
    m.push(Mount::Tmpfs(c_str("/dev/shm"), c_str(&shm_options)));
    // Writable places under the host's /dev (a workspace in /dev/shm) come back at the same
    // place in the fresh one.
    for (slot, p) in &in_dev {
        attach_beneath(&mut m, Path::new("/dev"), p, *slot, true);
    }
    m.push(Mount::Seal(c_str("/dev"), false));
    let hidden_sockets = host_sockets()
        .into_iter()
        .filter(|s| hide(s, inputs, &writable))
        .collect::<Vec<_>>();
    for s in &hidden_sockets {
        m.push(Mount::Hide(c_path(s)));
    }
    View {
        mounts: m,
        hidden_sockets,
        read_only_root,
    }
}

/// Attaches the copy in `slot` at `dir`, a directory beneath `root` (a fresh tmpfs of the
/// view), making the directories between them first.
fn attach_beneath(m: &mut Vec<Mount>, root: &Path, dir: &Path, slot: usize, writable: bool) {
    let between: Vec<&Path> = dir
        .ancestors()
        .filter(|a| within(a, root) && *a != root)
        .collect();
    for a in between.into_iter().rev() {
        m.push(Mount::Mkdir(c_path(a)));
    }
    m.push(Mount::Attach(c_path(dir), slot, writable));
}

/// Whether the host socket `s` is covered in the view: not when it is in a writable place,
/// under the private `/tmp` (out of sight already, unless in a directory bound back), under
/// the replaced `/proc` or `/dev`, or named by the caller.
fn hide(s: &Path, inputs: &Inputs, writable: &[PathBuf]) -> bool {
    if writable.iter().any(|w| within(s, w)) {
        return false;
    }
    if within(s, Path::new("/proc")) || within(s, Path::new("/dev")) {
        return false;
    }
    if inputs.private_tmp
        && within(s, Path::new("/tmp"))
        && !inputs.exposed.iter().any(|(d, _)| within(s, d))
    {
        return false;
    }
    if inputs.allowed_sockets.iter().any(|a| a == s) {
        return false;
    }
    // Only what is a socket now: a line of the list cannot make the view cover anything else.
    std::fs::symlink_metadata(s).is_ok_and(|m| m.file_type().is_socket())
}

/// The pathname sockets bound in this network namespace (`/proc/net/unix`), canonical where
/// they resolve, each once.
pub(crate) fn host_sockets() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read("/proc/net/unix") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = parse_unix_table(&text)
        .into_iter()
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The absolute socket paths of a `/proc/net/unix` listing: the eighth field onwards (a
/// path may hold spaces; the inode field is space-padded), abstract (`@`) and relative
/// names left out.
fn parse_unix_table(text: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n').skip(1) {
        let mut rest = line;
        let mut fields = 0;
        while fields < 7 {
            let start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
            rest = &rest[start..];
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            rest = &rest[end..];
            fields += 1;
        }
        if fields < 7 || rest.first() != Some(&b' ') {
            continue;
        }
        let path = &rest[1..];
        if path.first() == Some(&b'/') {
            out.push(PathBuf::from(std::ffi::OsStr::from_bytes(path)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_table_gives_absolute_paths_with_spaces_and_skips_the_rest() {
        let text = b"Num       RefCount Protocol Flags    Type St Inode Path\n\
0000000000000000: 00000002 00000000 00010000 0001 01   123 /run/a socket\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12345 @abstract\n\
0000000000000000: 00000002 00000000 00000000 0002 01 12346\n\
0000000000000000: 00000002 00000000 00010000 0001 01 12347 relative\n\
0000000000000000: 00000003 00000000 00000000 0001 03 99999 /tmp/tmux-0/default\n";
        assert_eq!(
            parse_unix_table(text),
            vec![
                PathBuf::from("/run/a socket"),
                PathBuf::from("/tmp/tmux-0/default")
            ]
        );
    }

    #[test]
    fn writable_places_are_outermost_and_leave_out_replaced_trees() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let writable = [
            inner.clone(),
            dir.path().to_path_buf(),
            PathBuf::from("/proc/self"),
            PathBuf::from("/tmp"),
        ];
        let inputs = Inputs {
            writable: &writable,
            exposed: &[],
            private_tmp: true,
            root_caller: false,
            memory: None,
            allowed_sockets: &[],
            covers: &[],
        };
        assert_eq!(
            writable_places(
                &inputs
                    .writable
                    .iter()
                    .filter_map(|w| std::fs::canonicalize(w).ok())
                    .collect::<Vec<_>>(),
                inputs.private_tmp
            ),
            vec![std::fs::canonicalize(dir.path()).unwrap()]
        );
    }

    #[test]
    fn the_plan_seals_the_root_before_binding_back_and_builds_dev() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let writable = [dir.path().to_path_buf()];
        let inputs = Inputs {
            writable: &writable,
            exposed: &[],
            private_tmp: true,
            root_caller: false,
            memory: None,
            allowed_sockets: &[],
            covers: &[],
        };
        let cover = Mount::Cover(c_str("/etc/shadow"), c_str("/state/conceal/file"));
        let covers = [cover.clone()];
        let view = plan(&Inputs {
            covers: &covers,
            ..inputs
        });
        // The covers come first: the copies of trees bound back carry them.
        assert_eq!(view.mounts[0], cover);
        assert!(view.read_only_root);
        let seal = view
            .mounts
            .iter()
            .position(|m| *m == Mount::Seal(c_str("/"), true))
            .expect("the root is sealed");
        let clone = view
            .mounts
            .iter()
            .position(|m| matches!(m, Mount::Clone(p, _) if p.as_bytes() == dir.path().canonicalize().unwrap().as_os_str().as_bytes()))
            .expect("the workspace is copied");
        assert!(clone < seal, "copied before the seal");
        assert!(view
            .mounts
            .iter()
            .any(|m| matches!(m, Mount::Devpts(p, o) if p.as_bytes() == b"/dev/pts" && o.to_bytes().starts_with(b"newinstance"))));
        // A writable `/` leaves the root as it is.
        let everything = [PathBuf::from("/")];
        let inputs = Inputs {
            writable: &everything,
            ..inputs
        };
        let view = plan(&inputs);
        assert!(!view.read_only_root);
        assert!(!view
            .mounts
            .iter()
            .any(|m| matches!(m, Mount::Seal(p, true) if p.as_bytes() == b"/")));
    }
}
