//! The agent matrix: commands as agents run them, under every built-in profile.
//!
//! Each command is a shell command line run through `/bin/bash -c` with stdin `/dev/null`, and
//! (unless it is expensive) through `/bin/sh -c` with stdin a pipe, by the library
//! (`sandbox_host::exec`) exactly as `sandbox exec --json` runs a request: only `PATH`, `HOME`
//! and `LANG` set, no terminal, the Landlock layer on (writes only in the workspace,
//! credentials unreadable), in a fresh copy of a fixture workspace. What each command needs
//! ([`Needs`]) and what each profile is for ([`purpose`]) decide the expected outcome: a cell
//! works when the profile provides everything the command needs, and is refused (a non-zero
//! status or a reported violation, with a message) otherwise. The expected table in
//! `docs/profiles.md` is rendered from this data (`cargo xtask matrix`); the tests in
//! `tests/tests/agent_matrix.rs` run every cell and check that the document is current.

use anyhow::{anyhow, bail, Context, Result};
use sandbox_host::exec::{self, Request};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// What a command needs from a profile, as bits.
pub type Needs = u8;
/// Runs a program other than the shell (any command that is not a shell builtin).
pub const EXEC: Needs = 1;
/// Starts processes: pipelines, command substitution, `&&` chains, programs that fork.
pub const SPAWN: Needs = 2;
/// Changes files in the workspace.
pub const WRITE: Needs = 4;
/// Connects to a server (on 127.0.0.1).
pub const NET: Needs = 8;
/// Traces a process (`ptrace`): kernel attack surface that every profile with a filter stops
/// (`@never`), whatever else it allows.
pub const TRACE: Needs = 16;

/// The built-in profiles, in the order of the table's columns.
pub const PROFILES: &[&str] = crate::matrix::PROFILES;

/// What `profile` is for: the needs it provides, and one sentence for the documentation.
pub fn purpose(profile: &str) -> Option<(Needs, &'static str)> {
    Some(match profile {
        "minimal" => (
            0,
            "reading: a shell's builtins work, any other program is refused",
        ),
        "network" => (
            NET,
            "a single program that talks to the network; no other program",
        ),
        "write" => (
            WRITE,
            "a single program that changes files; builtins may write files",
        ),
        "no-exec" => (
            WRITE | NET,
            "a single program with files and network, no other program",
        ),
        "shell" => (
            EXEC | SPAWN | WRITE,
            "agents' shell commands: programs, pipelines, builds, git, Python; no network",
        ),
        "shell-network" => (
            EXEC | SPAWN | WRITE | NET,
            "agents' everyday shell commands with the network: fetching packages and \
             repositories, local servers; no tracing, mounts or other kernel attack surface",
        ),
        "unrestricted" => (EXEC | SPAWN | WRITE | NET | TRACE, "everything (no filter)"),
        _ => return None,
    })
}

/// One command of the matrix.
#[derive(Debug)]
pub struct Cmd {
    /// Identifier.
    pub id: &'static str,
    /// The shell command line; `{PORT}` is the local server's port.
    pub script: &'static str,
    /// What it needs.
    pub needs: Needs,
    /// Text its stdout contains when it works.
    pub expect: &'static str,
    /// Expensive (venv, pip, gcc): run through `bash -c` only.
    pub heavy: bool,
}

const fn c(id: &'static str, script: &'static str, needs: Needs, expect: &'static str) -> Cmd {
    Cmd {
        id,
        script,
        needs,
        expect,
        heavy: false,
    }
}

const fn heavy(id: &'static str, script: &'static str, needs: Needs, expect: &'static str) -> Cmd {
    Cmd {
        id,
        script,
        needs,
        expect,
        heavy: true,
    }
}

const X: Needs = EXEC;
const XS: Needs = EXEC | SPAWN;
const XW: Needs = EXEC | WRITE;
const XSW: Needs = EXEC | SPAWN | WRITE;
const XN: Needs = EXEC | NET;
const XT: Needs = EXEC | TRACE;

/// The commands, in the order of the table's rows.
pub const COMMANDS: &[Cmd] = &[
    // Shell builtins only: the shell is the one program.
    c("echo", "echo hello", 0, "hello"),
    c("printf_arith", "x=3; printf '%s-%d\\n' \"$x\" $((x*2))", 0, "3-6"),
    c("read_heredoc", "while read -r l; do echo \"[$l]\"; done <<'EOF'\nalpha\nbeta\nEOF", 0, "[beta]"),
    c("read_stdin", "read -r line || line=none; echo \"got:$line\"", 0, "got:"),
    c("test_file", "[ -f data/fruits.txt ] && echo yes", 0, "yes"),
    c("cd_pwd", "cd data && pwd", 0, "/data"),
    c("case", "case abc in a*) echo match;; esac", 0, "match"),
    c("redirect_write", "echo note > out.txt && echo ok", WRITE, "ok"),
    // One program (the shell replaces itself with it).
    c("cat", "cat data/fruits.txt", X, "banana"),
    c("ls_la", "ls -la data", X, "fruits.txt"),
    c("grep_r", "grep -r needle data", X, "needle"),
    c("head", "head -n 2 data/fruits.txt", X, "apple"),
    c("tail", "tail -n 1 data/fruits.txt", X, "apple"),
    c("wc", "wc -l data/fruits.txt", X, "4"),
    c("sort", "sort data/fruits.txt", X, "apple\napple\nbanana"),
    c("uniq", "uniq -c data/sorted.txt", X, "2 apple"),
    c("cut", "cut -d, -f2 data/t.csv", X, "2\n5"),
    c("awk", "awk -F, 'NR>1{s+=$2} END{print s}' data/t.csv", X, "7"),
    c("sed_print", "sed -n 's/an/AN/gp' data/fruits.txt", X, "bANANa"),
    c("sha256sum", "sha256sum data/fruits.txt", X, "data/fruits.txt"),
    c("find", "find data -name '*.txt'", X, "data/sub/n.txt"),
    c("stat", "stat -c '%n %s' data/fruits.txt", X, "fruits.txt 26"),
    c("du", "du -a data", X, "data/sub"),
    c("diff", "diff -s a.txt a.txt", X, "are identical"),
    c("tar_tf", "tar tf data.tar", X, "data/fruits.txt"),
    c("gzip_dc", "gzip -dc fruits.gz", X, "cherry"),
    c("git_status", "git -C repo status --short", X, ""),
    c("git_log", "git -C repo log --oneline", X, "second"),
    c("git_diff", "git -C repo diff HEAD~1 --stat", X, "f.txt"),
    c("python_json", "python3 -c \"import json; print(json.load(open('data/j.json'))['k'])\"", X, "[1, 2, 3]"),
    c("python_sqlite", "python3 -c \"import sqlite3; print(sqlite3.connect(':memory:').execute('select 6*7').fetchone()[0])\"", X, "42"),
    c("python_ssl", "python3 -c \"import ssl; ssl.create_default_context(); print(ssl.OPENSSL_VERSION.split()[0])\"", X, "OpenSSL"),
    c("python_asyncio", "python3 -c \"import asyncio; asyncio.run(asyncio.sleep(0)); print('async ok')\"", X, "async ok"),
    c("node", "node -e 'console.log(6*7)'", X, "42"),
    c("getent", "getent hosts localhost", X, "localhost"),
    c("id", "id", X, "uid="),
    c("date", "date -u +%Y", X, "20"),
    c("locale", "locale", X, "LANG="),
    c("which", "which git", X, "bin/git"),
    c("env", "env", X, "PATH="),
    c("uname", "uname -s", X, "Linux"),
    // Processes: pipelines, substitutions, programs that fork.
    c("pipeline", "sort data/fruits.txt | uniq -c | sort -rn | head -n 1", XS, "2 apple"),
    c("cmd_subst", "echo \"lines: $(wc -l < data/fruits.txt)\"", XS, "lines: 4"),
    c("heredoc_cat", "cat <<'EOF' | tr a-z A-Z\nhere doc\nEOF", XS, "HERE DOC"),
    c("xargs", "find data -name '*.txt' | sort | xargs wc -l", XS, "total"),
    c("find_exec", "find data -name '*.txt' -exec grep -l needle {} +", XS, "data/sub/n.txt"),
    c("stdin_pipe", "cat | wc -l", XS, ""),
    c("ps", "ps aux | head -n 2", XS, "PID"),
    c("timeout", "timeout 5 sleep 0.1 && echo done", XS, "done"),
    c("background_wait", "(sleep 0.1; echo bg) & wait; echo fg", XS, "bg\nfg"),
    c("python_unittest", "python3 -m unittest -q test_x 2>&1 | tail -n 1", XS, "OK"),
    c("python_subprocess", "python3 -c \"import subprocess; print(subprocess.run(['echo','sub'],capture_output=True,text=True).stdout.strip())\"", XS, "sub"),
    c("python_multiprocessing", "python3 -c \"import multiprocessing as m\nr, w = m.Pipe(False)\np = m.Process(target=w.send, args=(42,)); p.start(); print(r.recv()); p.join()\"", XS, "42"),
    // Changing files.
    c("touch", "touch new && ls new", XW, "new"),
    c("mkdir", "mkdir -p d/e && ls -d d/e", XSW, "d/e"),
    c("cp", "cp a.txt c.txt && cat c.txt", XSW, "one"),
    c("mv", "mv a.txt moved.txt && ls moved.txt", XSW, "moved.txt"),
    c("rm", "rm a.txt && ls", XSW, "b.txt"),
    c("sed_i", "sed -i s/one/ONE/ a.txt && cat a.txt", XSW, "ONE"),
    c("patch", "diff -u a.txt b.txt > p.diff; patch -s a.txt < p.diff && cat a.txt", XSW, "two"),
    c("tar_czf", "tar czf d.tgz data && tar tzf d.tgz | wc -l", XSW, "7"),
    c("git_init_commit", "git init -q n && cd n && echo x > f && git add f && git commit -qm one && git log --oneline | wc -l", XSW, "1"),
    c("git_branch_merge", "cd repo && git checkout -qb topic && echo t >> f.txt && git commit -qam topic && git checkout -q main && git merge -q --no-edit topic && git branch && git log --oneline -1", XSW, "topic"),
    c("git_rebase", "cd repo && git checkout -qb side HEAD~1 && echo s > s.txt && git add s.txt && git commit -qm side && git rebase -q main && git log --oneline | wc -l", XSW, "3"),
    c("git_stash", "cd repo && echo change >> f.txt && git stash -q && git stash list | wc -l && git diff --stat | wc -l", XSW, "1\n0"),
    c("git_clone", "git clone -q repo clone && git -C clone log --oneline -1", XSW, "second"),
    heavy("gcc", "gcc -o hello hello.c && ./hello", XSW, "hello from C"),
    heavy("make", "make -s", XSW, "built"),
    heavy("venv_pip", "python3 -m venv v && v/bin/pip install -q --no-index demo-1.0-py3-none-any.whl && v/bin/python -c 'import demo; print(demo.VALUE)'", XSW, "demo 42"),
    // The network (a server on 127.0.0.1).
    c("curl", "curl -sS http://127.0.0.1:{PORT}/fruits.txt", XN, "banana"),
    c("python_http", "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{PORT}/').read().decode())\"", XN, "cherry"),
    // Tracing (PTRACE_TRACEME, the mildest form): refused by every profile with a filter.
    c("ptrace", "python3 -c \"import ctypes; print('ptrace', ctypes.CDLL(None).ptrace(0, 0, 0, 0))\"", XT, "ptrace 0"),
];

/// How a cell's command is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `/bin/bash -c`, stdin `/dev/null`.
    BashNull,
    /// `/bin/sh -c`, stdin a pipe carrying one line.
    ShPipe,
}

impl Via {
    /// Both, or only bash for expensive commands.
    pub fn for_cmd(cmd: &Cmd) -> &'static [Via] {
        if cmd.heavy {
            &[Via::BashNull]
        } else {
            &[Via::BashNull, Via::ShPipe]
        }
    }
}

/// What a profile's purpose promises for a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Exit status 0, the expected output, no violation.
    Works,
    /// A non-zero status or a violation, with a message (a violation or text on stderr).
    Refused,
}

/// The expected outcome of `cmd` under `profile`.
pub fn expected(cmd: &Cmd, profile: &str) -> Result<Expected> {
    let (has, _) = purpose(profile)
        .ok_or_else(|| anyhow!("profile {profile} has no purpose in the agent matrix"))?;
    Ok(if cmd.needs & !has == 0 {
        Expected::Works
    } else {
        Expected::Refused
    })
}

/// One measured cell.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Command id.
    pub command: &'static str,
    /// Profile.
    pub profile: &'static str,
    /// How it was started.
    pub via: Via,
    /// What was expected.
    pub expected: Expected,
    /// What happened, in words, when it differs; `None` when as expected.
    pub mismatch: Option<String>,
}

/// The fixture workspace (`ws` and `home` under it), built once per process (unsandboxed) and
/// copied for each cell.
pub fn master() -> Result<&'static Path> {
    static M: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    M.get_or_init(|| build_master().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|e| anyhow!("building the agent-matrix fixture: {e}"))
}

fn sh(dir: &Path, script: &str) -> Result<()> {
    let out = Command::new("/bin/sh")
        .args(["-c", script])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.parent().unwrap().join("home"))
        .output()?;
    if !out.status.success() {
        bail!("{script}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

fn build_master() -> Result<PathBuf> {
    let root = std::env::temp_dir().join(format!("sandbox-agent-matrix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let ws = root.join("ws");
    let home = root.join("home");
    for d in [ws.join("data/sub"), home.clone()] {
        std::fs::create_dir_all(d)?;
    }
    let files: &[(&str, &str)] = &[
        ("data/fruits.txt", "banana\napple\ncherry\napple\n"),
        ("data/sorted.txt", "apple\napple\nbanana\ncherry\n"),
        ("data/t.csv", "a,b,c\n1,2,3\n4,5,6\n"),
        ("data/j.json", "{\"k\": [1, 2, 3]}\n"),
        ("data/sub/n.txt", "a needle here\n"),
        ("a.txt", "one\n"),
        ("b.txt", "one\ntwo\n"),
        ("hello.c", "#include <stdio.h>\nint main(void) { puts(\"hello from C\"); return 0; }\n"),
        ("Makefile", "hello2: hello.c\n\tcc -o hello2 hello.c\nall: hello2\n\t@echo built\n.DEFAULT_GOAL := all\n"),
        ("test_x.py", "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n"),
    ];
    for (p, text) in files {
        std::fs::write(ws.join(p), text)?;
    }
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Agent\n\temail = agent@example.com\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    )?;
    sh(
        &ws,
        "tar cf data.tar data && gzip -c -n data/fruits.txt > fruits.gz",
    )?;
    sh(
        &ws,
        "git init -q repo && cd repo && echo one > f.txt && git add f.txt && git commit -qm first \
         && echo two >> f.txt && git commit -qam second",
    )?;
    // A wheel for `pip install --no-index`: a module and its metadata in a zip.
    sh(
        &ws,
        "python3 - <<'EOF'\nimport zipfile, hashlib, base64\nfiles = {\n 'demo.py': 'VALUE = \"demo 42\"\\n',\n 'demo-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: demo\\nVersion: 1.0\\n',\n 'demo-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',\n}\ndef h(t):\n    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).decode().rstrip('=')\nrecord = ''.join(f'{n},{h(t)},{len(t.encode())}\\n' for n, t in files.items()) + 'demo-1.0.dist-info/RECORD,,\\n'\nwith zipfile.ZipFile('demo-1.0-py3-none-any.whl', 'w') as z:\n    for n, t in files.items():\n        z.writestr(n, t)\n    z.writestr('demo-1.0.dist-info/RECORD', record)\nEOF",
    )?;
    Ok(root)
}

/// A fresh copy of the fixture: (root, workspace, home).
fn fresh() -> Result<(tempfile::TempDir, PathBuf, PathBuf)> {
    let m = master()?;
    let dir = tempfile::Builder::new()
        .prefix("sandbox-agent-cell-")
        .tempdir()?;
    let st = Command::new("cp")
        .args(["-a", "--"])
        .arg(m.join("ws"))
        .arg(m.join("home"))
        .arg(dir.path())
        .status()?;
    if !st.success() {
        bail!("copying the fixture failed");
    }
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    Ok((dir, ws, home))
}

/// Runs one cell and compares it with the expectation.
pub fn run_cell(cmd: &'static Cmd, profile: &'static str, via: Via) -> Result<Cell> {
    let expected = expected(cmd, profile)?;
    // Node is measured where it is installed (CI installs Debian's nodejs).
    if cmd.id == "node" && !Path::new("/usr/bin/node").exists() {
        return Ok(Cell {
            command: cmd.id,
            profile,
            via,
            expected,
            mismatch: None,
        });
    }
    let (_dir, ws, home) = fresh()?;
    let port = crate::matrix::server_port()?.to_string();
    let script = cmd.script.replace("{PORT}", &port);
    let shell = match via {
        Via::BashNull => "/bin/bash",
        Via::ShPipe => "/bin/sh",
    };
    let mut r = Request::new([shell, "-c", &script]);
    r.cwd = Some(ws.display().to_string());
    r.profile = profile.to_string();
    r.timeout_s = 300.0;
    r.env = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
        ("HOME", home.display().to_string()),
        ("LANG", "C.UTF-8".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if via == Via::ShPipe {
        r.stdin = Some("piped line\n".into());
    }
    // Node runs under the default limits: the memory limit bounds the job, not its address
    // space (docs/exec.md).
    let res = exec::exec(&r).with_context(|| format!("{} under {profile}", cmd.id))?;
    let violation = res.violation.as_ref().map(|v| v.syscall.clone());
    let works = res.exit_code == Some(0) && res.stdout.contains(cmd.expect) && violation.is_none();
    // A call refused and reported (the program carried on with the errno) is a refusal with
    // a message too.
    let reported: Vec<&str> = res.violations.iter().map(|v| v.syscall.as_str()).collect();
    let refused = res.exit_code != Some(0) || violation.is_some() || !reported.is_empty();
    let said = violation.is_some() || !reported.is_empty() || !res.stderr.trim().is_empty();
    let mismatch = match expected {
        Expected::Works if works => None,
        Expected::Refused if refused && said => None,
        _ => Some(format!(
            "expected {expected:?}; exit {:?} signal {:?} violation {:?} reported {reported:?}\n--- stdout\n{}--- stderr\n{}",
            res.exit_code,
            res.signal,
            violation,
            tail(&res.stdout),
            tail(&res.stderr)
        )),
    };
    Ok(Cell {
        command: cmd.id,
        profile,
        via,
        expected,
        mismatch,
    })
}

fn tail(s: &str) -> &str {
    let mut i = s.len().saturating_sub(1500);
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// Runs every cell of `profiles` on `threads` threads.
pub fn run_all(profiles: &[&'static str], threads: usize) -> Result<Vec<Cell>> {
    let cells: Vec<(&'static Cmd, &'static str, Via)> = profiles
        .iter()
        .flat_map(|p| {
            COMMANDS
                .iter()
                .flat_map(move |c| Via::for_cmd(c).iter().map(move |v| (c, *p, *v)))
        })
        .collect();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Result<Cell>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((c, p, v)) = cells.get(i) else { break };
                let r = run_cell(c, p, *v);
                out.lock().unwrap().push(r);
            });
        }
    });
    out.into_inner().unwrap().into_iter().collect()
}

fn needs_text(n: Needs) -> String {
    let names: Vec<&str> = [
        (EXEC, "exec"),
        (SPAWN, "processes"),
        (WRITE, "writes"),
        (NET, "network"),
        (TRACE, "ptrace"),
    ]
    .iter()
    .filter(|(b, _)| n & b != 0)
    .map(|(_, s)| *s)
    .collect();
    if names.is_empty() {
        "builtins".into()
    } else {
        names.join(", ")
    }
}

/// The Markdown section: each profile's purpose, then the expected outcome of every cell.
pub fn render() -> Result<String> {
    let mut s = String::new();
    let cells: usize = COMMANDS
        .iter()
        .map(|c| Via::for_cmd(c).len())
        .sum::<usize>()
        * PROFILES.len();
    writeln!(
        s,
        "{} commands, {} cells: each command through `bash -c` with stdin `/dev/null` and (except \
         the three marked *bash only*) through `sh -c` with stdin a pipe, under every profile, \
         with only `PATH`, `HOME` and `LANG` set, no terminal, and the Landlock layer on, in a \
         fresh workspace (`xtask/src/agent_matrix.rs`). A cell **works** (exit 0, the expected \
         output, no violation) when the profile is for everything the command needs; otherwise \
         it is **refused**: a non-zero status or a reported violation, with a message. \
         `tests/tests/agent_matrix.rs` runs every cell and fails when this table is stale.\n",
        COMMANDS.len(),
        cells
    )?;
    writeln!(s, "| profile | for | provides |\n|---|---|---|")?;
    for p in PROFILES {
        let (n, what) = purpose(p).ok_or_else(|| anyhow!("no purpose for {p}"))?;
        writeln!(s, "| `{p}` | {what} | {} |", needs_text(n))?;
    }
    write!(s, "\n| command | needs |")?;
    for p in PROFILES {
        write!(s, " {p} |")?;
    }
    write!(s, "\n|---|---|")?;
    for _ in PROFILES {
        write!(s, "---|")?;
    }
    writeln!(s)?;
    for c in COMMANDS {
        let shown = c.script.replace('\n', "⏎").replace('|', "\\|");
        write!(
            s,
            "| `{}`{} | {} |",
            shown,
            if c.heavy { " (bash only)" } else { "" },
            needs_text(c.needs)
        )?;
        for p in PROFILES {
            let e = match expected(c, p)? {
                Expected::Works => "works",
                Expected::Refused => "refused",
            };
            write!(s, " {e} |")?;
        }
        writeln!(s)?;
    }
    Ok(s)
}

/// Markers of the generated section in `docs/profiles.md`.
pub const BEGIN: &str =
    "<!-- agent-matrix:begin (generated by `cargo xtask matrix`; edit outside these markers) -->";
/// End marker.
pub const END: &str = "<!-- agent-matrix:end -->";

/// `docs/profiles.md` with the generated section replaced (or appended).
pub fn updated_doc(old: &str) -> Result<String> {
    let table = render()?;
    Ok(match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{BEGIN}\n{table}{}", &old[..b], &old[e..]),
        _ => format!("{old}\n## Agent command matrix\n\n{BEGIN}\n{table}{END}\n"),
    })
}

/// Rewrites the generated agent section of `docs/profiles.md` under `root`.
pub fn write_doc(root: &Path) -> Result<()> {
    let path = root.join("docs/profiles.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, updated_doc(&old)?)?;
    Ok(())
}
