//! The command matrix: real commands under every built-in profile, measured on the spot.
//!
//! Each cell runs one command of [`COMMANDS`] in a fresh fixture directory (text files, a CSV, a
//! JSON file, a tar archive, a gzip file, a git repository with one commit and one change, and a
//! scratch directory `w/`) under one built-in profile, with `SECCOMP_DEFAULT_ACTION=trap` so a
//! blocked call names itself. The same command also runs without any filter in its own fresh
//! fixture; that run is the reference. A cell's measured [`Outcome`]:
//!
//! - `runs`: same exit status, same stdout and the same files afterwards as the reference;
//! - `blocked: NAME`: the preload's SIGSYS handler printed `libsandbox: blocked syscall NAME`;
//! - `refused: ERRNO`: the program failed, said why (`Read-only file system` is EROFS), and the
//!   fixture is exactly as it was before: nothing was created, changed or removed;
//! - anything else is `other: ...` and never matches an expectation.
//!
//! The expected outcome comes from what the profile means (see [`Kind`]), not from measuring.
//! `cargo xtask matrix` renders the table into `docs/profiles.md`; `tests/tests/matrix.rs` runs
//! every cell as a test.

use anyhow::{anyhow, bail, Context, Result};
use sandbox_policy::profile::Profile;
use sandbox_policy::Action;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The built-in profiles, in the order of the table's columns.
pub const PROFILES: &[&str] = &[
    "minimal",
    "network",
    "write",
    "no-exec",
    "shell",
    "shell-network",
    "unrestricted",
];

/// What a command does, which decides what each profile must do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Reads files and writes to stdout: runs under every profile.
    Read,
    /// Talks TCP to a server on 127.0.0.1: runs where the profile allows the network (network,
    /// no-exec, shell-network, unrestricted); elsewhere its first socket call is blocked.
    Net,
    /// Creates, changes or removes files: refused with EROFS where files are read-only
    /// (minimal, network), runs elsewhere.
    Write,
    /// Starts processes (`sh -c` with a pipeline): runs where process creation is allowed
    /// (shell, shell-network, unrestricted); elsewhere the fork (clone) is blocked.
    Spawn,
}

impl Kind {
    /// The outcome `profile`'s meaning promises for a command of this kind.
    pub fn expected(self, profile: &str) -> Expected {
        match (self, profile) {
            (Kind::Read, _) => Expected::Runs,
            (Kind::Net, "network" | "no-exec" | "shell-network" | "unrestricted") => Expected::Runs,
            (Kind::Net, _) => Expected::Blocked(&["socket", "socketpair"]),
            (Kind::Write, "minimal" | "network") => Expected::Refused("EROFS"),
            (Kind::Write, _) => Expected::Runs,
            (Kind::Spawn, "shell" | "shell-network" | "unrestricted") => Expected::Runs,
            (Kind::Spawn, _) => Expected::Blocked(&["clone", "fork", "vfork"]),
        }
    }

    /// Short name for the table.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Net => "network",
            Kind::Write => "write",
            Kind::Spawn => "spawn",
        }
    }
}

/// One command of the matrix.
#[derive(Debug)]
pub struct Cmd {
    /// Identifier (a Rust identifier, used for test names).
    pub id: &'static str,
    /// The argument vector; `{PORT}` is replaced with the test server's port. Run directly
    /// (no shell) in the fixture directory.
    pub argv: &'static [&'static str],
    /// What the command does.
    pub kind: Kind,
}

impl Cmd {
    /// The command line as shown in the table.
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| {
                if a.contains('\'') {
                    format!("\"{a}\"")
                } else if a.contains([' ', '|', ';', '"', '(', '*']) {
                    format!("'{a}'")
                } else {
                    a.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

const PY: &str = "/usr/bin/python3";

/// The commands, in the order of the table's rows.
pub const COMMANDS: &[Cmd] = &[
    Cmd {
        id: "cat",
        argv: &["cat", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "ls_la",
        argv: &["ls", "-la", "data"],
        kind: Kind::Read,
    },
    Cmd {
        id: "grep_r",
        argv: &["grep", "-r", "needle", "data"],
        kind: Kind::Read,
    },
    Cmd {
        id: "head",
        argv: &["head", "-n", "2", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "tail",
        argv: &["tail", "-n", "2", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "wc",
        argv: &["wc", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "sort",
        argv: &["sort", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "uniq",
        argv: &["uniq", "-c", "data/sorted.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "cut",
        argv: &["cut", "-d,", "-f2", "data/t.csv"],
        kind: Kind::Read,
    },
    Cmd {
        id: "sha256sum",
        argv: &["sha256sum", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "find",
        argv: &["find", "data", "-name", "*.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "stat",
        argv: &["stat", "-c", "%n %s %F %a", "data/fruits.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "du",
        argv: &["du", "-a", "data"],
        kind: Kind::Read,
    },
    Cmd {
        id: "diff",
        argv: &["diff", "data/fruits.txt", "data/other.txt"],
        kind: Kind::Read,
    },
    Cmd {
        id: "tar_tf",
        argv: &["tar", "tf", "data.tar"],
        kind: Kind::Read,
    },
    Cmd {
        id: "gzip_dc",
        argv: &["gzip", "-dc", "fruits.gz"],
        kind: Kind::Read,
    },
    Cmd {
        id: "jq",
        argv: &["jq", ".k", "data/j.json"],
        kind: Kind::Read,
    },
    Cmd {
        id: "python_json",
        argv: &[
            PY,
            "-c",
            "import json; print(json.load(open('data/j.json'))['k'])",
        ],
        kind: Kind::Read,
    },
    Cmd {
        id: "python_read",
        argv: &[
            PY,
            "-c",
            "print(open('data/fruits.txt').read().upper(), end='')",
        ],
        kind: Kind::Read,
    },
    Cmd {
        id: "git_status",
        argv: &["git", "-C", "repo", "status"],
        kind: Kind::Read,
    },
    Cmd {
        id: "git_log",
        argv: &["git", "-C", "repo", "log", "--oneline"],
        kind: Kind::Read,
    },
    Cmd {
        id: "git_diff",
        argv: &["git", "-C", "repo", "diff"],
        kind: Kind::Read,
    },
    Cmd {
        id: "curl",
        argv: &["curl", "-sS", "http://127.0.0.1:{PORT}/fruits.txt"],
        kind: Kind::Net,
    },
    Cmd {
        id: "touch",
        argv: &["touch", "w/new"],
        kind: Kind::Write,
    },
    Cmd {
        id: "mkdir",
        argv: &["mkdir", "w/dir"],
        kind: Kind::Write,
    },
    Cmd {
        id: "cp",
        argv: &["cp", "w/a", "w/b"],
        kind: Kind::Write,
    },
    Cmd {
        id: "mv",
        argv: &["mv", "w/a", "w/moved"],
        kind: Kind::Write,
    },
    Cmd {
        id: "rm",
        argv: &["rm", "w/s.txt"],
        kind: Kind::Write,
    },
    Cmd {
        id: "sed_i",
        argv: &["sed", "-i", "s/x/y/", "w/s.txt"],
        kind: Kind::Write,
    },
    Cmd {
        id: "sh_pipeline",
        argv: &["sh", "-c", "sort data/fruits.txt | uniq -c | sort -rn"],
        kind: Kind::Spawn,
    },
    // As agents run commands: bash -c with no SHLVL and no TERM (bash then asks getpeername of
    // its stdin).
    Cmd {
        id: "bash_c",
        argv: &["bash", "-c", "wc -l data/fruits.txt | cat"],
        kind: Kind::Spawn,
    },
];

/// The command with this id.
pub fn command(id: &str) -> Option<&'static Cmd> {
    COMMANDS.iter().find(|c| c.id == id)
}

/// What a profile's meaning says about a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// The command does what it does without a filter.
    Runs,
    /// The process is stopped at one of these syscalls.
    Blocked(&'static [&'static str]),
    /// The program fails with this errno and changes nothing.
    Refused(&'static str),
}

impl Expected {
    /// Whether `o` is what this expectation promises.
    pub fn accepts(&self, o: &Outcome) -> bool {
        match (self, o) {
            (Expected::Runs, Outcome::Runs) => true,
            (Expected::Blocked(names), Outcome::Blocked(n)) => names.contains(&n.as_str()),
            (Expected::Refused(e), Outcome::Refused(m)) => e == m,
            _ => false,
        }
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Runs => f.write_str("runs"),
            Expected::Blocked(n) => write!(f, "blocked: {}", n.join(" or ")),
            Expected::Refused(e) => write!(f, "refused: {e}"),
        }
    }
}

/// What happened in a cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Same status, stdout and files as the unfiltered reference.
    Runs,
    /// Stopped by the filter at this syscall.
    Blocked(String),
    /// Failed with this errno (from the program's message) and left the fixture untouched.
    Refused(String),
    /// Anything else, described.
    Other(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Runs => f.write_str("runs"),
            Outcome::Blocked(n) => write!(f, "blocked: {n}"),
            Outcome::Refused(e) => write!(f, "refused: {e}"),
            Outcome::Other(d) => write!(f, "other: {d}"),
        }
    }
}

/// One measured cell.
#[derive(Clone, Debug)]
pub struct CellResult {
    /// Command id.
    pub command: &'static str,
    /// Profile name.
    pub profile: &'static str,
    /// What the profile's meaning promises.
    pub expected: Expected,
    /// What was measured.
    pub measured: Outcome,
    /// The sandboxed run's exit status, stdout and stderr, for failure messages.
    pub detail: String,
}

impl CellResult {
    /// Whether the measurement is what the profile promises.
    pub fn ok(&self) -> bool {
        self.expected.accepts(&self.measured)
    }
}

/// Locates `libsandbox.so`: `$SANDBOX_PRELOAD_SO` if set, else the library embedded in the
/// host (built from this workspace by `host/build.rs`), extracted the way the host always
/// extracts it.
pub fn preload() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SANDBOX_PRELOAD_SO") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("SANDBOX_PRELOAD_SO={} is not a file", p.display());
        }
        return Ok(p);
    }
    Ok(sandbox_host::extract::extracted()?)
}

/// The body the test server returns for every request.
const SERVED: &str = "banana\napple\ncherry\napple\n";

/// Port of a tiny HTTP server on 127.0.0.1, started once per process on a background thread.
pub fn server_port() -> Result<u16> {
    static PORT: OnceLock<std::result::Result<u16, String>> = OnceLock::new();
    PORT.get_or_init(|| start_server().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn start_server() -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    SERVED.len()
                );
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(SERVED.as_bytes());
            });
        }
    });
    Ok(port)
}

fn run_quiet(cwd: &Path, argv: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {argv:?}"))?;
    if !out.status.success() {
        bail!("{argv:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A fresh fixture directory, removed on drop.
struct Fixture(PathBuf);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GIT_ENV: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "t"),
    ("GIT_AUTHOR_EMAIL", "t@example.com"),
    ("GIT_COMMITTER_NAME", "t"),
    ("GIT_COMMITTER_EMAIL", "t@example.com"),
    ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
    ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
];

fn fixture() -> Result<Fixture> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sandbox-matrix-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let fx = Fixture(dir);
    let d = &fx.0;
    for sub in ["data/sub", "repo", "w"] {
        std::fs::create_dir_all(d.join(sub))?;
    }
    let files: &[(&str, &str)] = &[
        ("data/fruits.txt", SERVED),
        ("data/sorted.txt", "apple\napple\nbanana\ncherry\n"),
        ("data/other.txt", "apple\nbanana\n"),
        ("data/t.csv", "a,b,c\n1,2,3\n4,5,6\n"),
        ("data/j.json", "{\"k\": [1, 2, 3]}\n"),
        ("data/sub/n.txt", "a needle here\n"),
        ("w/a", "hello\n"),
        ("w/s.txt", "x marks\n"),
        ("repo/f.txt", "one\n"),
    ];
    for (p, text) in files {
        std::fs::write(d.join(p), text)?;
    }
    let tar = [
        "tar",
        "--sort=name",
        "--mtime=@1767225600",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
    ];
    run_quiet(d, &[&tar[..], &["-cf", "data.tar", "data"]].concat(), &[])?;
    let gz = Command::new("gzip")
        .args(["-c", "-n", "data/fruits.txt"])
        .current_dir(d)
        .output()?;
    if !gz.status.success() {
        bail!("gzip failed");
    }
    std::fs::write(d.join("fruits.gz"), gz.stdout)?;
    let repo = d.join("repo");
    run_quiet(&repo, &["git", "init", "-q", "-b", "main"], GIT_ENV)?;
    run_quiet(&repo, &["git", "add", "f.txt"], GIT_ENV)?;
    run_quiet(&repo, &["git", "commit", "-q", "-m", "init"], GIT_ENV)?;
    std::fs::write(repo.join("f.txt"), "one\ntwo\n")?;
    // Fixed times, so listings of the reference and the cell agree.
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    set_times(d, when)?;
    Ok(fx)
}

fn set_times(p: &Path, when: SystemTime) -> Result<()> {
    let meta = std::fs::symlink_metadata(p)?;
    if meta.is_dir() {
        if p.file_name().is_some_and(|n| n == ".git") {
            return Ok(());
        }
        for e in std::fs::read_dir(p)? {
            set_times(&e?.path(), when)?;
        }
    }
    if !meta.file_type().is_symlink() {
        std::fs::File::open(p)?.set_modified(when)?;
    }
    Ok(())
}

/// Every path under the fixture (the git directory excluded: git refreshes its index where it
/// may) with its type, mode and content.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, p: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        for e in rd.flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == "repo/.git" {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                out.insert(rel, format!("dir {mode:o}"));
                walk(root, &path, out);
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                out.insert(
                    rel,
                    format!("file {mode:o} {}", String::from_utf8_lossy(&content)),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// One run of a command: status, output, and the fixture before and after.
#[derive(Clone, Debug)]
struct Run {
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    before: BTreeMap<String, String>,
    after: BTreeMap<String, String>,
}

const TIMEOUT: Duration = Duration::from_secs(60);

fn run_once(cmd: &Cmd, env: &[(&'static str, String)], so: Option<&Path>) -> Result<Run> {
    let fx = fixture()?;
    let before = snapshot(&fx.0);
    let port = server_port()?.to_string();
    let argv: Vec<String> = cmd
        .argv
        .iter()
        .map(|a| a.replace("{PORT}", &port))
        .collect();
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .current_dir(&fx.0)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &fx.0)
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .envs(GIT_ENV.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(so) = so {
        if !env.is_empty() {
            c.env("LD_PRELOAD", so);
            c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        }
    }
    let mut child = c.spawn().with_context(|| format!("starting {}", argv[0]))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{} timed out after {TIMEOUT:?}", cmd.id);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    use std::os::unix::process::ExitStatusExt;
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    let after = snapshot(&fx.0);
    let stdout = stdout.replace(&*fx.0.to_string_lossy(), "<fixture>");
    Ok(Run {
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        before,
        after,
    })
}

/// The unfiltered run of a command, once per process.
fn reference(cmd: &'static Cmd) -> Result<Run> {
    type Slot = Arc<OnceLock<std::result::Result<Run, String>>>;
    static REFS: OnceLock<Mutex<HashMap<&'static str, Slot>>> = OnceLock::new();
    let slot = REFS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(cmd.id)
        .or_default()
        .clone();
    slot.get_or_init(|| run_once(cmd, &[], None).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn errno_in(stderr: &str) -> Option<&'static str> {
    [
        ("Read-only file system", "EROFS"),
        ("Permission denied", "EACCES"),
        ("Operation not permitted", "EPERM"),
        ("Function not implemented", "ENOSYS"),
    ]
    .iter()
    .find(|(m, _)| stderr.contains(m))
    .map(|(_, e)| *e)
}

/// The paths whose entries differ between two snapshots.
fn diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> String {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let d: Vec<&str> = keys
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| k.as_str())
        .collect();
    d.join(", ")
}

fn classify(run: &Run, reference: &Run) -> Outcome {
    if let Some(i) = run.stderr.find("libsandbox: blocked syscall ") {
        let rest = &run.stderr[i + "libsandbox: blocked syscall ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        return Outcome::Blocked(name);
    }
    if let Some(sig) = run.signal {
        return Outcome::Other(format!("killed by signal {sig}"));
    }
    if run.code == reference.code && run.stdout == reference.stdout && run.after == reference.after
    {
        return Outcome::Runs;
    }
    if run.code != Some(0) && run.after == run.before {
        if let Some(e) = errno_in(&run.stderr) {
            return Outcome::Refused(e.to_string());
        }
        return Outcome::Other(format!(
            "failed with status {:?}, files unchanged",
            run.code
        ));
    }
    if run.after != reference.after && run.after != run.before {
        return Outcome::Other(format!(
            "files changed, but not as without a filter: {}",
            diff(&run.after, &reference.after)
        ));
    }
    Outcome::Other(format!(
        "status {:?} (reference {:?}), stdout {}, files differ at: {}",
        run.code,
        reference.code,
        if run.stdout == reference.stdout {
            "same"
        } else {
            "differs"
        },
        diff(&run.after, &reference.after)
    ))
}

/// Runs one cell: `command` (an id of [`COMMANDS`]) under the built-in `profile`.
pub fn run_cell(so: &Path, command: &str, profile: &str) -> Result<CellResult> {
    let cmd =
        self::command(command).ok_or_else(|| anyhow!("no command {command} in the matrix"))?;
    let profile: &'static str = PROFILES
        .iter()
        .find(|p| **p == profile)
        .ok_or_else(|| anyhow!("no built-in profile {profile}"))?;
    let env = Profile::builtin(profile)?.env(Some(Action::Trap));
    let reference = reference(cmd)?;
    let run = run_once(cmd, &env, Some(so))?;
    let measured = classify(&run, &reference);
    let detail = format!(
        "status {:?} signal {:?}\n--- stdout\n{}--- stderr\n{}--- reference stdout (status {:?})\n{}",
        run.code, run.signal, run.stdout, run.stderr, reference.code, reference.stdout
    );
    Ok(CellResult {
        command: cmd.id,
        profile,
        expected: cmd.kind.expected(profile),
        measured,
        detail,
    })
}

/// Runs every cell (two at a time) and returns them row by row.
pub fn run_matrix(so: &Path) -> Result<Vec<CellResult>> {
    let cells: Vec<(&str, &str)> = COMMANDS
        .iter()
        .flat_map(|c| PROFILES.iter().map(move |p| (c.id, *p)))
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<CellResult>>>> =
        Mutex::new((0..cells.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((c, p)) = cells.get(i) else { break };
                let r = run_cell(so, c, p);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

/// The Markdown table of a matrix run.
pub fn render(results: &[CellResult]) -> String {
    let mut s = String::new();
    let ok = results.iter().filter(|r| r.ok()).count();
    s.push_str(&format!(
        "Measured by `cargo xtask matrix` on {} ({} of {} cells as the profiles' meaning says). \
         Each cell is the measured outcome; ✓ means it is the expected one, ✗ shows what was \
         expected instead. `refused: EROFS` means the program failed with \"Read-only file \
         system\" and the fixture was left exactly as it was.\n\n",
        host_description(),
        ok,
        results.len()
    ));
    s.push_str("| command | kind |");
    for p in PROFILES {
        s.push_str(&format!(" {p} |"));
    }
    s.push_str("\n|---|---|");
    for _ in PROFILES {
        s.push_str("---|");
    }
    s.push('\n');
    for cmd in COMMANDS {
        s.push_str(&format!(
            "| `{}` | {} |",
            cmd.display().replace('|', "\\|"),
            cmd.kind.name()
        ));
        for p in PROFILES {
            match results
                .iter()
                .find(|r| r.command == cmd.id && r.profile == *p)
            {
                Some(r) if r.ok() => s.push_str(&format!(" {} ✓ |", r.measured)),
                Some(r) => s.push_str(&format!(" {} ✗ expected {} |", r.measured, r.expected)),
                None => s.push_str(" - |"),
            }
        }
        s.push('\n');
    }
    s.push_str("\nExpected outcomes by kind: ");
    for k in [Kind::Read, Kind::Net, Kind::Write, Kind::Spawn] {
        let row: Vec<String> = PROFILES
            .iter()
            .map(|p| format!("{p}: {}", k.expected(p)))
            .collect();
        s.push_str(&format!("**{}**: {}. ", k.name(), row.join(", ")));
    }
    s.push('\n');
    s
}

/// The groups of `profiles/groups.toml` as a Markdown table: name, one-line doc, members.
pub fn render_groups() -> String {
    let mut s = String::from("| group | what it is for | members |\n|---|---|---|\n");
    for g in sandbox_policy::groups::all() {
        let members: Vec<String> = g
            .entries
            .iter()
            .map(|e| format!("`{}`", e.replace('|', "\\|")))
            .collect();
        s.push_str(&format!(
            "| `@{}` | {} | {} |\n",
            g.name,
            g.doc.replace('|', "\\|"),
            members.join(" ")
        ));
    }
    s
}

fn host_description() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("Linux {}", kernel.trim())
}

const BEGIN: &str =
    "<!-- matrix:begin (generated by `cargo xtask matrix`; edit outside these markers) -->";
const END: &str = "<!-- matrix:end -->";

/// `cargo xtask matrix`: builds the preload, runs every cell, writes the table between the
/// markers of `docs/profiles.md` (hand-written text outside them is kept), prints a summary and
/// fails if any cell is not what its profile promises. With `check`, writes nothing. (The
/// agent section of the same file is written by [`crate::agent_matrix::write_doc`].)
pub fn run(root: &Path, check: bool) -> Result<()> {
    let so = preload()?;
    let results = run_matrix(&so)?;
    let table = format!(
        "{}\n## Command matrix\n\n{}",
        render_groups(),
        render(&results)
    );
    let bad: Vec<&CellResult> = results.iter().filter(|r| !r.ok()).collect();
    if !check {
        let path = root.join("docs/profiles.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let new = match (old.find(BEGIN), old.find(END)) {
            (Some(b), Some(e)) if b < e => format!("{}{BEGIN}\n{table}{}", &old[..b], &old[e..]),
            _ => format!("{old}\n## Command matrix\n\n{BEGIN}\n{table}{END}\n"),
        };
        std::fs::write(&path, new)?;
        println!("wrote {}", path.display());
    }
    println!(
        "{} cells, {} as expected",
        results.len(),
        results.len() - bad.len()
    );
    for r in &bad {
        println!(
            "MISMATCH {} under {}: measured {}, expected {}\n{}",
            r.command, r.profile, r.measured, r.expected, r.detail
        );
    }
    if !bad.is_empty() {
        bail!(
            "{} cells differ from what their profile promises",
            bad.len()
        );
    }
    Ok(())
}
