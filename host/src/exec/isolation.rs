//! The namespace layer of a job: whether this machine can create unprivileged namespaces,
//! and what the job's mount namespace holds (a fresh `/proc`, a private `/tmp`, read-only
//! binds over the repository's code-running files and the asked paths). The namespaces
//! themselves and the init that runs in them are `spawn/init.rs`. See docs/isolation.md.

use super::namespaces::{Mount, Namespaces};
use crate::refusal::Refusal;
use serde::Serialize;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Variable that makes the host treat namespaces as unavailable (to see how a command fares
/// on a machine without them); its value is given as the reason.
pub const FORCE_UNAVAILABLE_VAR: &str = "SANDBOX_ISOLATION_UNAVAILABLE";

/// How strictly the namespace layer must be in force (shared with the Landlock layer).
pub use crate::layer_mode::LayerMode as Mode;

/// What the layer did for one job, for results and `sandbox run -v`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// The mode asked for.
    pub mode: Mode,
    /// The namespaces the program ran in (empty when they were unavailable).
    pub namespaces: Vec<String>,
    /// Paths mounted read-only over themselves (the repository's hooks directories and
    /// redirections, the asked paths; placeholders for those that did not exist).
    pub read_only: Vec<PathBuf>,
    /// The host's tree is read-only in the job's view, apart from its writable places.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_only_root: bool,
    /// Host unix sockets covered in the view (outside the writable places, not allowed by
    /// the caller): a `connect` to one is refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hidden_sockets: Vec<PathBuf>,
    /// Why there were no namespaces (`preferred` on a machine without them).
    pub unavailable: Option<String>,
    /// What the job left in the repository's control files that would run a command on
    /// the user's next git command, undone after it (module `git_guard`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<super::git_guard::Reverted>,
}

/// The namespaces the layer creates.
const NAMESPACES: &[&str] = &["user", "pid", "mount", "ipc", "uts"];

/// The probe's answer, once a probe has run in this process.
static PROBE: OnceLock<Option<String>> = OnceLock::new();

/// The override variable's reason, when it is set.
fn forced() -> Option<String> {
    std::env::var_os(FORCE_UNAVAILABLE_VAR)
        .filter(|v| !v.is_empty())
        .map(|v| {
            format!(
                "{FORCE_UNAVAILABLE_VAR}={} (namespaces treated as unavailable)",
                v.to_string_lossy()
            )
        })
}

/// Why namespaces cannot be used here, if they cannot (probed once per process; the
/// override variable is read every time). The probe does what the namespaces' init does
/// before the program starts: a child cloned into new user, PID, mount, IPC and UTS
/// namespaces (by `clone3`, or `clone` where that is refused) maps its ids and mounts a fresh
/// `/proc` (see `sys::namespace_probe`).
pub fn unavailable() -> Option<String> {
    forced().or_else(probed)
}

/// The probe's answer (run once per process), whatever the override variable says.
fn probed() -> Option<String> {
    PROBE
        .get_or_init(|| {
            let flags = libc::CLONE_NEWUSER
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWNS
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS;
            crate::sys::namespace_probe(flags)
                .err()
                .map(|(stage, e)| explain(stage, &e))
        })
        .clone()
}

/// The sentence for a probe that failed at `stage` with `e`: what is missing, why, and the
/// setting that would change it.
fn explain(stage: crate::sys::ProbeStage, e: &std::io::Error) -> String {
    use crate::sys::ProbeStage;
    match stage {
        ProbeStage::Proc => format!("a fresh /proc is refused ({e}): {}", proc_masked()),
        ProbeStage::IdMap => format!(
            "cannot map user and group ids in a new user namespace: {e}{}",
            because(&reasons())
        ),
        ProbeStage::Create | ProbeStage::Private => format!(
            "cannot create user, PID and mount namespaces: {e}{}",
            because(&reasons())
        ),
    }
}

/// ` (first reason)`, or nothing.
fn because(reasons: &[String]) -> String {
    reasons
        .first()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

/// Why the kernel refuses a fresh `/proc` here: it does so in a user namespace when the
/// `/proc` it can see has file systems mounted over parts of it (it would reveal what they
/// hide), which container runtimes do (runc's `maskedPaths` and `readonlyPaths`).
fn proc_masked() -> String {
    let text = crate::mountinfo::read().unwrap_or_default();
    let over: Vec<String> = crate::mountinfo::parse(&text)
        .filter(|m| m.point.starts_with("/proc") && m.point != Path::new("/proc"))
        .map(|m| m.point.display().to_string())
        .collect();
    if over.is_empty() {
        return "the kernel refuses a new proc mount to this user namespace".to_string();
    }
    format!(
        "the container masks /proc (runc maskedPaths/readonlyPaths: {} paths mounted over it, \
         such as {}); Kubernetes: securityContext.procMount: Unmasked with hostUsers: false; \
         Docker: --security-opt systempaths=unconfined",
        over.len(),
        over[0]
    )
}

/// Whether a seccomp filter confines this process (`Seccomp: 2` in its status).
fn seccomp_filtered() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// What a job plans with: namespaces are presumed to work until a probe says otherwise. The
/// spawn itself is the test (its `clone3` creates them): when it is refused, the spawn runs
/// the probes (`recheck`) and the job is planned again. A probe of its own would cost every
/// run a fork of the host and a second set of namespaces.
pub(crate) fn presumed_unavailable() -> Option<String> {
    forced().or_else(|| match PROBE.get() {
        Some(answer) => answer.clone(),
        // A container's masked /proc predicts that the init's fresh /proc will be refused:
        // the probe runs now instead of after a spawn that would fail at the mount (which
        // cost a one-shot run about 1.5 ms more, docs/benchmarks.md). The probe decides.
        None if proc_masked_hint() => probed(),
        None => None,
    })
}

/// Whether the first of runc's masked `/proc` files that exists here is a character device:
/// runc's `maskedPaths` (Docker's and Kubernetes' defaults) bind `/dev/null` over those that
/// exist, and procfs's own are regular files. A `statx` or two, so every run can afford it;
/// none existing (a kernel built without them), it says nothing.
fn proc_masked_hint() -> bool {
    use std::os::unix::fs::FileTypeExt;
    [
        "/proc/kcore",
        "/proc/keys",
        "/proc/timer_list",
        "/proc/sched_debug",
    ]
    .iter()
    .find_map(|p| std::fs::symlink_metadata(p).ok())
    .is_some_and(|m| m.file_type().is_char_device())
}

/// After a spawn's `clone3` with namespace flags failed: runs the probes (isolation and
/// network) and says whether either now reports namespaces unavailable, so that planning the
/// job again gives a different plan.
pub(crate) fn recheck() -> bool {
    // Both probes run: the next plan needs both answers.
    let isolation = unavailable().is_some();
    let network = super::net::unavailable().is_some();
    isolation || network
}

/// Known reasons a machine refuses unprivileged user namespaces, as found here.
fn reasons() -> Vec<String> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut out = Vec::new();
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        out.push("sysctl kernel.unprivileged_userns_clone = 0".to_string());
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        out.push("sysctl user.max_user_namespaces = 0".to_string());
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        out.push(
            "AppArmor restricts unprivileged user namespaces \
             (sysctl kernel.apparmor_restrict_unprivileged_userns = 1)"
                .to_string(),
        );
    }
    let container = Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists();
    if seccomp_filtered() {
        // Docker's default profile refuses clone3 (ENOSYS), unshare, setns and clone with
        // namespace flags to a container without CAP_SYS_ADMIN; Kubernetes' RuntimeDefault is
        // the same profile.
        // The filter may be a sandbox's this process runs inside (a nested run), whose
        // built-in profiles refuse namespaces: said as well as the container's.
        out.push(format!(
            "namespaces refused by the seccomp filter this process runs under ({}, or a \
             sandbox around this one, whose built-in profiles refuse them); Docker: \
             --security-opt seccomp=unconfined or a profile allowing clone, clone3 and unshare \
             with namespace flags; Kubernetes: securityContext.seccompProfile type Unconfined \
             or Localhost",
            if container {
                "the container's seccomp profile"
            } else {
                "the process's seccomp profile"
            }
        ));
    } else if container {
        out.push(
            "running inside a container, whose seccomp profile or capabilities may refuse \
             namespaces"
                .to_string(),
        );
    }
    out
}

/// `sandbox check`'s preflight: one line per namespace kind (works, or why not), then the
/// machine settings that explain a refusal.
pub fn preflight() -> Vec<String> {
    let kinds: [(&str, libc::c_int); 4] = [
        ("user", libc::CLONE_NEWUSER),
        ("pid", libc::CLONE_NEWUSER | libc::CLONE_NEWPID),
        ("mount", libc::CLONE_NEWUSER | libc::CLONE_NEWNS),
        ("network", libc::CLONE_NEWUSER | libc::CLONE_NEWNET),
    ];
    let mut lines: Vec<String> = kinds
        .iter()
        .map(|(name, flags)| match crate::sys::unshare_probe(*flags) {
            Ok(()) => format!("{name} namespace: yes"),
            Err(e) => format!("{name} namespace: no ({e})"),
        })
        .collect();
    // What a run needs of them together (the probe runs share, cached).
    lines.push(match probed() {
        Some(why) => format!("namespaces for a run: no ({why})"),
        None => "namespaces for a run (clone, id maps, fresh /proc): yes".to_string(),
    });
    if lines.iter().any(|l| !l.ends_with(": yes")) {
        for r in reasons() {
            lines.push(format!("because: {r}"));
        }
    }
    if let Some(v) = std::env::var_os(FORCE_UNAVAILABLE_VAR).filter(|v| !v.is_empty()) {
        lines.push(format!(
            "{FORCE_UNAVAILABLE_VAR}={} is set: runs treat namespaces as unavailable",
            v.to_string_lossy()
        ));
    }
    lines
}

/// The namespaces of one job and the host-side state they need (the holds on what it covers,
/// module `placeholder`), undone on drop.
#[derive(Debug)]
pub(crate) struct Layer {
    /// What the init creates and mounts.
    pub namespaces: Namespaces,
    /// What results report.
    pub status: Status,
    holds: Vec<super::placeholder::Hold>,
}

impl Drop for Layer {
    fn drop(&mut self) {
        for h in self.holds.drain(..) {
            h.release();
        }
    }
}

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths were checked for NUL")
}

/// The repository files that run code on the user's side later and are kept read-only
/// during the job (hooks directories, redirections): for the repository the workspace is in
/// (found upwards, as git does).
fn repository_files(workspace: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut pins = Vec::new();
    let mut protect = Vec::new();
    let Some(dot_git) = workspace
        .ancestors()
        .map(|a| a.join(".git"))
        .find(|g| g.symlink_metadata().is_ok())
    else {
        return (pins, protect);
    };
    let git_dir = if dot_git.is_dir() {
        // A mount point cannot be renamed or removed: `.git` stays where git looks.
        pins.push(dot_git.clone());
        dot_git
    } else {
        // `gitdir: PATH` (worktrees, submodules): the file itself says where hooks are.
        protect.push(dot_git.clone());
        let text = std::fs::read_to_string(&dot_git).unwrap_or_default();
        match text.trim().strip_prefix("gitdir:").map(str::trim) {
            Some(d) => dot_git.parent().unwrap_or(Path::new("/")).join(d),
            None => return (pins, protect),
        }
    };
    // A worktree's git directory names the common one, which holds hooks and config.
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(c) => {
            protect.push(git_dir.join("commondir"));
            let common = git_dir.join(c.trim());
            std::fs::canonicalize(&common).unwrap_or(common)
        }
        Err(_) => {
            // Created, it would point git at other hooks: protected while absent too.
            protect.push(git_dir.join("commondir"));
            git_dir.clone()
        }
    };
    // The configuration files stay writable (git renames `config.lock` over them, which a
    // mount refuses): module `git_guard` checks them after the job instead.
    protect.push(common.join("hooks"));
    protect.extend(super::git_controls::module_hooks(&common));
    (pins, protect)
}

/// The directories under `/tmp` the job names (its working directory, workspace, writable
/// and read-only paths, the program's directory), outermost only: they are bound into the
/// private `/tmp` at the same place.
fn under_tmp(paths: &[&Path]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| {
            if p.is_dir() {
                p
            } else {
                p.parent().map(Path::to_path_buf).unwrap_or(p)
            }
        })
        .filter(|p| p.starts_with("/tmp") && p != Path::new("/tmp"))
        .collect();
    dirs.sort();
    dirs.dedup();
    let all = dirs.clone();
    dirs.retain(|d| !all.iter().any(|o| o != d && d.starts_with(o)));
    dirs
}

/// What one job's namespaces hold.
pub(crate) struct Inputs<'a> {
    /// The mode asked for.
    pub mode: Mode,
    /// The workspace: the repository found from it gets its hooks and config protected; a
    /// read-only path that does not exist must be inside it.
    pub workspace: &'a Path,
    /// The asked read-only paths (absolute, checked for NUL).
    pub read_only: &'a [PathBuf],
    /// Paths the job names, kept visible when they are under `/tmp`.
    pub visible: &'a [&'a Path],
    /// Landlock's writable set: these stay writable when re-exposed under `/tmp`.
    pub writable: &'a [PathBuf],
    /// Mount a private `/tmp` (not when Landlock denies reading something under `/tmp`: its
    /// rule for the new `/tmp` would reach into the directories bound back there).
    pub private_tmp: bool,
    /// Host unix sockets the caller names as reachable (`--allow-unix-socket`).
    pub allowed_sockets: &'a [PathBuf],
    /// The deny paths (credential list and `deny_read`) when the job's Landlock rules carve
    /// around them: the view covers them instead (module `conceal`). Empty: nothing to cover
    /// (no Landlock layer).
    pub deny_read: &'a [PathBuf],
    /// The job's memory limit, bytes (`None`: none): the private `/tmp` and `/dev/shm` stay
    /// within it.
    pub memory: Option<u64>,
}

/// Resolves the layer for a job. `Ok(None)`: off, or unavailable under `preferred` (the
/// caller warns); `required` without namespaces is refused naming `isolation`.
pub(crate) fn layer(inputs: &Inputs) -> Result<Result<Layer, String>, Refusal> {
    if inputs.mode == Mode::Off {
        return Ok(Err(String::new()));
    }
    if let Some(why) = presumed_unavailable() {
        if inputs.mode == Mode::Required {
            return Err(Refusal::new(
                "isolation",
                format!("namespaces are required but unavailable: {why}"),
            ));
        }
        // Nothing else keeps the asked paths read-only: refused, never left writable.
        if !inputs.read_only.is_empty() {
            return Err(Refusal::new(
                "read_only_paths",
                format!("needs the namespace layer, which is unavailable: {why}"),
            ));
        }
        return Ok(Err(why));
    }
    let (pins, mut protect) = repository_files(inputs.workspace);
    // The repository's git directories stay visible too (a worktree's may be elsewhere).
    let mut visible = inputs.visible.to_vec();
    let parents: Vec<&Path> = pins
        .iter()
        .chain(&protect)
        .filter_map(|p| p.parent())
        .collect();
    visible.extend(parents);
    let exposed: Vec<(PathBuf, bool)> = if inputs.private_tmp {
        under_tmp(&visible)
            .into_iter()
            .map(|d| {
                let writable = inputs.writable.iter().any(|w| {
                    std::fs::canonicalize(w).is_ok_and(|w| d.starts_with(&w) || w.starts_with(&d))
                });
                (d, writable)
            })
            .collect()
    } else {
        Vec::new()
    };
    // Without covers (no deny list, or no sources to bind) Landlock's carve-out stays.
    let covers = if inputs.deny_read.is_empty() {
        None
    } else {
        super::conceal::covers(inputs.deny_read)
    };
    let view = super::view::plan(&super::view::Inputs {
        writable: inputs.writable,
        exposed: &exposed,
        private_tmp: inputs.private_tmp,
        root_caller: crate::sys::euid() == 0,
        allowed_sockets: inputs.allowed_sockets,
        covers: covers.as_deref().unwrap_or_default(),
        memory: inputs.memory,
    });
    let mut mounts = view.mounts;
    for p in &pins {
        mounts.push(Mount::Pin(c_path(p)));
    }
    let mut holds = Vec::new();
    let fail = |field: String, e: std::io::Error, p: &Path| {
        Refusal::new(
            field,
            format!(
                "cannot protect `{}` while it does not exist: {e}",
                p.display()
            ),
        )
    };
    for (i, p) in inputs.read_only.iter().enumerate() {
        if p.symlink_metadata().is_err() && !p.starts_with(inputs.workspace) {
            return Err(Refusal::new(
                format!("read_only_paths[{i}]"),
                format!(
                    "`{}` does not exist and is outside the workspace `{}`",
                    p.display(),
                    inputs.workspace.display()
                ),
            ));
        }
        protect.push(p.clone());
    }
    let mut read_only = Vec::new();
    for p in protect {
        // The hold keeps a placeholder from being removed under this job by another (which
        // detaches the read-only mount over it); one that cannot be taken refuses the job.
        let target = match super::placeholder::cover(&p, p.ends_with("hooks")) {
            Ok(covered) => {
                holds.extend(covered.hold);
                covered.target
            }
            // What the caller cannot create, the command (same user, no capabilities)
            // cannot either.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::EROFS)
                ) =>
            {
                continue
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Refusal::new("isolation", e.to_string()))
            }
            Err(e) => return Err(fail("read_only_paths".into(), e, &p)),
        };
        if !read_only.contains(&target) {
            read_only.push(target);
        }
    }
    // Outer mounts first, so that inner ones land on top of them.
    read_only.sort_by_key(|p| p.components().count());
    for p in &read_only {
        mounts.push(Mount::ReadOnly(c_path(p)));
    }
    Ok(Ok(Layer {
        namespaces: Namespaces {
            isolate: true,
            net: false,
            private_tmp: inputs.private_tmp,
            fresh_dev: true,
            read_root: covers.is_some(),
            mounts,
        },
        status: Status {
            mode: inputs.mode,
            namespaces: NAMESPACES.iter().map(|s| s.to_string()).collect(),
            read_only,
            read_only_root: view.read_only_root,
            hidden_sockets: view.hidden_sockets,
            unavailable: None,
            reverted: Vec::new(),
        },
        holds,
    }))
}
