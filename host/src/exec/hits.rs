//! Which resource limits a run hit, so that a limit never ends in a silent success.
//!
//! Each limit is seen where the kernel or the runtime leaves a trace: the wall-clock timeout and
//! the output cap by the runtime itself; `RLIMIT_CPU` and `RLIMIT_FSIZE` by the signal that
//! ended the program (SIGXCPU, SIGXFSZ); the file-size limit of a descendant (whose signal only
//! its parent sees, and a shell goes on after it) by a file of exactly the limit's size, or
//! larger, changed during the run in the places the program may write: a write the limit stops
//! is cut at the limit, so a file ends exactly there; the memory and process limits by the
//! counters of the request's cgroups (kills by the out-of-memory killer, refused forks), or,
//! where no memory cgroup holds the job, by the host's memory watchdog, which knows when it
//! ended the job (module `memwatch`). A limit is named only when it was hit: a program that
//! fails for another reason gets no word about memory.

use std::path::PathBuf;
use std::time::SystemTime;

/// Most directory entries the file-size check looks at per run: the check must stay cheap for
/// large workspaces; a file beyond them is not found (said in docs/exec.md).
pub(crate) const MAX_SCANNED: usize = 20_000;

/// A limit that was hit, by its name in results (`limits_hit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hit {
    /// The wall-clock timeout.
    Time,
    /// An output stream's cap.
    Output,
    /// RLIMIT_CPU.
    Cpu,
    /// RLIMIT_FSIZE.
    Fsize,
    /// The job's memory limit (the cgroup's out-of-memory killer, or the watchdog, ended it).
    Memory,
    /// The request cgroup's process limit (a fork was refused).
    Processes,
    /// RLIMIT_NOFILE: a program said it was refused a descriptor (`EMFILE`).
    Nofile,
}

impl Hit {
    /// The name in `limits_hit`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hit::Time => "time",
            Hit::Output => "output",
            Hit::Cpu => "cpu",
            Hit::Fsize => "fsize",
            Hit::Memory => "memory",
            Hit::Processes => "processes",
            Hit::Nofile => "nofile",
        }
    }
}

/// What the request's cgroups and the memory watchdog stopped (module `contain`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// The memory limit was hit, and how.
    pub memory: Option<MemoryHit>,
    /// Forks the process limit refused.
    pub processes: u64,
}

/// How the memory limit stopped the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MemoryHit {
    /// The memory cgroup's out-of-memory killer ended this many processes.
    Killed(u64),
    /// The watchdog saw the job's memory past the limit and ended it.
    Watchdog(super::memwatch::Fired),
    /// The watchdog could not be started (the reason): the job was ended at once.
    Unwatched(String),
}

impl MemoryHit {
    /// What happened, for the warning line (`limit`: the limit in bytes).
    pub(crate) fn detail(&self, limit: u64) -> String {
        match self {
            MemoryHit::Killed(n) => format!(
                "the out-of-memory killer ended {n} process{} at the memory limit of {limit} \
                 bytes",
                if *n == 1 { "" } else { "es" }
            ),
            MemoryHit::Watchdog(f) => format!(
                "the job's processes held {} bytes ({} process{}), past the limit of {limit} \
                 bytes for the whole job; it was ended",
                f.resident,
                f.processes,
                if f.processes == 1 { "" } else { "es" }
            ),
            MemoryHit::Unwatched(e) => format!(
                "the memory watchdog could not be started ({e}), so the job was ended at once"
            ),
        }
    }
}

/// What a run leaves to find a write the file-size limit cut: when it started, and the
/// 512-byte blocks its processes sent toward storage (`ru_oublock`) when every one of them was
/// reaped through the one wait that reported them (a namespace's init; `None` otherwise).
pub(crate) struct Writes {
    /// When the run started: a cut file was changed at or after it.
    pub since: SystemTime,
    /// The blocks the whole run wrote, when known.
    pub blocks: Option<u64>,
}

/// File systems whose every change to a file's data is counted in the writer's `write_bytes`
/// (`ru_oublock`): buffered writes dirty page-cache pages of a mapping with writeback, which
/// the kernel charges to the task that dirtied them, and copies go through those pages too.
/// ext2, ext3 and ext4 only: xfs and btrfs share extents on `copy_file_range` (reflink), so a
/// copy the limit cuts can dirty nothing (measured on xfs: killed by SIGXFSZ, 0 blocks). Not
/// tmpfs or ramfs (no writeback), FUSE, 9p or ZFS (writes beside the page cache), nor anything
/// unknown; nor a `dax` mount.
const COUNTED_FS: &[&str] = &["ext2", "ext3", "ext4"];

/// What `statfs` reports for ext2, ext3 and ext4 (`EXT4_SUPER_MAGIC`).
const EXT_MAGIC: i64 = 0xEF53;

/// The places to search for a file cut at the limit: all of `roots`, unless the run is known
/// to have written nothing (`Writes::blocks` is zero and this kernel counts writes), in which
/// case only those of them (and the mounts under them) on file systems whose writes go
/// uncounted. A write the limit cuts changes a file, so it dirties a page; what is left out is
/// a write into a page that was already dirty when the run started, and one by a child that
/// the kernel reaped itself (its parent ignored `SIGCHLD`), whose usage reaches no parent
/// (docs/exec.md).
pub(crate) fn roots_to_search(roots: Vec<PathBuf>, writes: &Writes) -> Vec<PathBuf> {
    static COUNTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // Without CONFIG_TASK_IO_ACCOUNTING there is no `/proc/self/io` and `ru_oublock` stays 0.
    let counted = *COUNTED.get_or_init(|| std::path::Path::new("/proc/self/io").exists());
    if writes.blocks != Some(0) || !counted {
        return roots;
    }
    let Some(mountinfo) = crate::mountinfo::read() else {
        return roots;
    };
    let canonical: Vec<PathBuf> = roots
        .iter()
        .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
        .collect();
    uncounted(&canonical, &mountinfo, on_counted_fs)
}

/// Whether `path` lies on ext2, ext3 or ext4, by `statfs`: the file system the path resolves
/// to now, whatever was mounted over what.
fn on_counted_fs(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .ok()
        .and_then(|p| crate::sys::fs_type(&p).ok())
        == Some(EXT_MAGIC)
}

/// Of `roots` (canonical paths): those not on a counted file system (`on_counted`) or under a
/// `dax` mount, and under the others the mount points whose file system is not counted, by
/// the mount table `mountinfo` (`/proc/self/mountinfo`'s format). A table with no mount in it
/// leaves every root to be searched.
fn uncounted(
    roots: &[PathBuf],
    mountinfo: &str,
    on_counted: impl Fn(&std::path::Path) -> bool,
) -> Vec<PathBuf> {
    // Mount point, whether its file system is counted, whether it is a `dax` mount.
    let mounts: Vec<(PathBuf, bool, bool)> = crate::mountinfo::parse(mountinfo)
        .map(|m| {
            let dax = m
                .super_options
                .split(',')
                .any(|o| o == "dax" || o.starts_with("dax=") && o != "dax=never");
            (m.point, COUNTED_FS.contains(&m.fs), dax)
        })
        .collect();
    if mounts.is_empty() {
        return roots.to_vec();
    }
    let mut out = Vec::new();
    for root in roots {
        let under_dax = mounts.iter().any(|(p, _, dax)| *dax && root.starts_with(p));
        if under_dax || !on_counted(root) {
            out.push(root.clone());
            continue;
        }
        for (p, counted, dax) in &mounts {
            if (!counted || *dax) && p.starts_with(root) && p != root {
                out.push(p.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A regular file of at least `limit` bytes, changed at or after `since`, under `roots`
/// (symbolic links are not followed); at most [`MAX_SCANNED`] entries are looked at, level by
/// level (what a program writes near the top of its workspace is looked at before what lies
/// deep in a build tree).
pub(crate) fn file_at_limit(roots: &[PathBuf], limit: u64, since: SystemTime) -> Option<PathBuf> {
    search(roots, limit, since, MAX_SCANNED)
}

/// [`file_at_limit`] with a budget of `budget` entries.
fn search(roots: &[PathBuf], limit: u64, since: SystemTime, mut budget: usize) -> Option<PathBuf> {
    let mut queue: std::collections::VecDeque<PathBuf> = roots.iter().cloned().collect();
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                queue.push_back(e.path());
            } else if kind.is_file() {
                let Ok(m) = e.metadata() else { continue };
                if m.len() >= limit && m.modified().is_ok_and(|t| t >= since) {
                    return Some(e.path());
                }
            }
        }
    }
    None
}

/// The warning line for `hit`, in the caller's terms (`field` names the request field or the
/// flag that sets the limit, when there is one).
pub(crate) fn warning(hit: Hit, detail: &str, field: Option<&str>) -> String {
    let change = field
        .map(|f| format!("; raise {f} if that is expected"))
        .unwrap_or_default();
    let what = match hit {
        Hit::Time => "the time limit ended the program".to_string(),
        Hit::Output => "output beyond the cap was discarded".to_string(),
        Hit::Cpu => "the CPU-time limit ended the program".to_string(),
        Hit::Fsize => format!("a write was cut at the file-size limit{detail}"),
        Hit::Memory => detail.to_string(),
        Hit::Processes => detail.to_string(),
        Hit::Nofile => format!("a program was refused a file descriptor{detail}"),
    };
    format!("sandbox: limit hit: {}: {what}{change}", hit.name())
}

/// The time limit's warning in `warnings`, told that the job had been refused `calls` first
/// (each named in the result's violations): a program that waits for what a refused call would
/// have given (a server it could not start, a socket it could not open) waits until the limit,
/// and raising the limit is then the wrong change.
pub(crate) fn time_after_refusals(warnings: &mut [String], calls: &[&str]) {
    let Some(line) = warnings
        .iter_mut()
        .find(|w| w.starts_with("sandbox: limit hit: time:"))
    else {
        return;
    };
    if let Some(said) = refused_first(calls) {
        line.push_str(&format!(" ({said})"));
    }
}

/// What the time limit's line adds when the job had been refused `calls` first (`None`
/// where nothing was refused).
pub(crate) fn refused_first(calls: &[&str]) -> Option<String> {
    if calls.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = calls.to_vec();
    names.sort_unstable();
    names.dedup();
    Some(format!(
        "it had been refused {}: a program waiting for what a refused call would have given \
         waits until the limit; allow the call, as its violation says, rather than raising \
         the limit",
        names.join(", ")
    ))
}

/// Whether a program's output says it was refused a descriptor at RLIMIT_NOFILE: the words
/// of `strerror(EMFILE)`, "Too many open files" (glibc, musl, Python, Rust, and Node's
/// `EMFILE: too many open files`). Not the bare name `EMFILE`, which a `grep` of sources prints
/// too. The kernel tells the host nothing when a descriptor is refused; the program's own
/// report is what there is.
pub(crate) fn said_emfile(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"oo many open files").is_some()
}

/// Whether a program's output says a fork failed for want of processes: the words of
/// `strerror(EAGAIN)` on a line that names the fork (`bash: fork: retry: Resource temporarily
/// unavailable`, `fork: Resource temporarily unavailable`; Python's `BlockingIOError` names
/// no fork on its line and is not matched). Where the process limit is RLIMIT_NPROC in the job's user namespace (no pids
/// controller) the kernel tells the host nothing; the program's own report is what there is.
pub(crate) fn said_fork_refused(text: &str) -> bool {
    fork_refused(text.as_bytes())
}

fn fork_refused(text: &[u8]) -> bool {
    memchr::memmem::find_iter(text, b"Resource temporarily unavailable").any(|at| {
        let start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
        let line = &text[start..at];
        [&b"fork"[..], b"clone", b"spawn"]
            .iter()
            .any(|w| memchr::memmem::find(line, w).is_some())
    })
}

/// Whether a program's output says a file in the job's private `/tmp` or `/dev/shm` met the end
/// of its space (`strerror(ENOSPC)` on a line naming one of them): those are sized within the
/// job's memory (module `view`).
pub(crate) fn said_tmp_full(text: &str) -> bool {
    tmp_full(text.as_bytes())
}

fn tmp_full(text: &[u8]) -> bool {
    memchr::memmem::find_iter(text, b"No space left on device").any(|at| {
        let start = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |i| at + i);
        let line = &text[start..end];
        [&b"/tmp"[..], b"/dev/shm"]
            .iter()
            .any(|w| memchr::memmem::find(line, w).is_some())
    })
}

/// Whether `text` holds a line a limit check reads (module `tee` keeps such lines of
/// `sandbox run`'s stderr, as it keeps the refusals' candidates).
pub(crate) fn names_a_limit(text: &[u8]) -> bool {
    memchr::memmem::find(text, b"oo many open files").is_some()
        || fork_refused(text)
        || tmp_full(text)
}

#[cfg(test)]
mod tests {
    use super::{said_fork_refused, said_tmp_full, time_after_refusals, warning, Hit};

    #[test]
    fn a_full_private_tmp_in_the_words_programs_use() {
        assert!(said_tmp_full(
            "dd: error writing '/tmp/big': No space left on device\n"
        ));
        assert!(said_tmp_full(
            "OSError: [Errno 28] No space left on device: '/dev/shm/x'"
        ));
        assert!(!said_tmp_full("write /work/out: No space left on device\n"));
        assert!(!said_tmp_full("/tmp\nNo space left on device"));
    }

    #[test]
    fn a_refused_fork_in_the_words_programs_use() {
        for said in [
            "bash: fork: retry: Resource temporarily unavailable\n",
            "sh: 1: Cannot fork\nbash: fork: Resource temporarily unavailable",
        ] {
            assert!(said_fork_refused(said), "{said}");
        }
        for other in [
            "read: Resource temporarily unavailable\n",
            "fork() returned -1\nResource temporarily unavailable\n",
            "",
        ] {
            assert!(!said_fork_refused(other), "{other}");
        }
    }

    #[test]
    fn the_time_limit_says_what_the_job_was_refused_before_it() {
        let time = warning(Hit::Time, "", Some("timeout_s"));
        let mut warnings = vec!["sandbox: warning: other".to_string(), time.clone()];
        time_after_refusals(&mut warnings, &["socket", "connect", "socket"]);
        assert_eq!(warnings[0], "sandbox: warning: other");
        assert!(
            warnings[1].starts_with(&time)
                && warnings[1].contains("it had been refused connect, socket:")
                && warnings[1].contains("rather than raising the limit"),
            "{warnings:?}"
        );
        // Nothing refused: the line is as it was.
        let mut alone = vec![time.clone()];
        time_after_refusals(&mut alone, &[]);
        assert_eq!(alone, [time]);
    }

    #[test]
    fn emfile_in_the_words_programs_use() {
        for said in [
            "bash: f: Too many open files",
            "npm ERR! Error: EMFILE: too many open files, scandir '/w/node_modules'",
            "Error: EMFILE: too many open files, open '/x/package.json'",
            "OSError: [Errno 24] Too many open files",
        ] {
            assert!(super::said_emfile(said), "{said}");
        }
        assert!(!super::said_emfile("too many files changed"));
        assert!(!super::said_emfile(
            "src/fs.rs: // EMFILE when the table is full"
        ));
    }

    use super::{roots_to_search, search, uncounted, Writes};
    use std::path::PathBuf;
    use std::time::SystemTime;

    /// A mount table as the kernel writes it: ext4 at `/`, a tmpfs and a second ext4 under
    /// `/work/repo`, xfs with `dax` at `/pmem`, an overlay and a btrfs over it at `/var/lib/c`,
    /// a tmpfs at a point with a space.
    const MOUNTINFO: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw,discard
30 22 0:25 / /work/repo/cache rw,nosuid shared:5 - tmpfs tmpfs rw,size=65536k
31 22 259:2 / /work/repo/sub rw,relatime shared:6 - ext4 /dev/sdb1 rw
32 22 259:3 / /pmem rw,relatime shared:7 - xfs /dev/pmem0 rw,dax=always
33 22 0:40 / /var/lib/c rw,relatime shared:8 - overlay overlay rw,lowerdir=/l,upperdir=/u
34 22 0:41 / /work/my\\040dir rw shared:9 - tmpfs tmpfs rw
35 22 259:4 / /var/lib/c rw,relatime shared:10 - btrfs /dev/sdc1 rw,space_cache=v2
";

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn only_places_whose_writes_go_uncounted_are_searched_after_a_run_that_wrote_nothing() {
        let ext = |r: &std::path::Path| !r.starts_with("/elsewhere");
        // On ext4, the mounts under the root that are not counted: the tmpfs, not the ext4.
        assert_eq!(
            uncounted(&[p("/work/repo")], MOUNTINFO, ext),
            [p("/work/repo/cache")]
        );
        // A root whose own file system is not counted (by statfs), or under a dax mount: all
        // of it.
        assert_eq!(
            uncounted(&[p("/elsewhere/x")], MOUNTINFO, ext),
            [p("/elsewhere/x")]
        );
        assert_eq!(uncounted(&[p("/pmem/a")], MOUNTINFO, ext), [p("/pmem/a")]);
        // Under `/var/lib`: the overlay and the btrfs mounted over it (reflink), the point with
        // an escaped space under `/work`, and nothing twice.
        assert_eq!(
            uncounted(&[p("/var/lib")], MOUNTINFO, ext),
            [p("/var/lib/c")]
        );
        assert_eq!(
            uncounted(&[p("/work")], MOUNTINFO, ext),
            [p("/work/my dir"), p("/work/repo/cache")]
        );
        // `/work/repository` is not under `/work/repo`.
        let wrong = "40 22 0:50 / /work/repository rw - tmpfs tmpfs rw\n";
        let table = format!("{MOUNTINFO}{wrong}");
        assert_eq!(
            uncounted(&[p("/work/repo")], &table, ext),
            [p("/work/repo/cache")]
        );
        // A table with no mount in it: everything is searched.
        assert_eq!(
            uncounted(&[p("/work")], "garbage\n\n- -\n", ext),
            [p("/work")]
        );
    }

    #[test]
    fn every_root_is_searched_unless_the_run_is_known_to_have_written_nothing() {
        let roots = vec![p("/"), p("/nonexistent/place")];
        for blocks in [None, Some(1), Some(u64::MAX)] {
            let w = Writes {
                since: SystemTime::now(),
                blocks,
            };
            assert_eq!(roots_to_search(roots.clone(), &w), roots, "{blocks:?}");
        }
        // Known to have written nothing: each root is searched only where this machine's
        // mounts do not count writes (a missing place, which `statfs` cannot tell, is).
        let w = Writes {
            since: SystemTime::now(),
            blocks: Some(0),
        };
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let searched = roots_to_search(roots.clone(), &w);
        assert_eq!(searched, uncounted(&roots, &table, super::on_counted_fs));
        assert!(searched.contains(&p("/nonexistent/place")), "{searched:?}");
    }

    #[test]
    fn the_search_looks_near_the_top_first_and_stops_at_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let since = SystemTime::now() - std::time::Duration::from_secs(1);
        // Three deep trees of small files beside `b/big`, one level down.
        for t in ["a1", "a2", "a3"] {
            let deep = dir.path().join(t).join("b/c");
            std::fs::create_dir_all(&deep).unwrap();
            for i in 0..30 {
                std::fs::write(deep.join(format!("f{i}")), b"x").unwrap();
            }
        }
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let big = dir.path().join("b/big");
        std::fs::write(&big, [0u8; 100]).unwrap();
        let roots = [dir.path().to_path_buf()];
        // Level by level: the first two levels hold 8 entries, whatever order they are
        // listed in (a walk into the first directory listed would spend the budget in a tree).
        assert_eq!(search(&roots, 100, since, 8), Some(big.clone()));
        // Control: deeper than the budget reaches, it is not found; with enough, it is.
        let deep = dir.path().join("a2/b/c/big");
        std::fs::rename(&big, &deep).unwrap();
        assert_eq!(search(&roots, 100, since, 8), None);
        assert_eq!(search(&roots, 100, since, 200), Some(deep));
        // Too small, or changed before the run: not a cut.
        assert_eq!(search(&roots, 101, since, 200), None);
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(search(&roots, 100, later, 200), None);
    }
}
