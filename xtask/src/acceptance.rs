//! `cargo xtask acceptance`: real projects' own test suites inside the sandbox and outside it,
//! as uid 65534, compared (tests/acceptance/projects.toml lists them; docs/acceptance.md has
//! the results).
//!
//! Inside, every step is one `sandbox exec --json` request of the documented default form:
//! `argv` (`bash -c LINE`), `profile`, `cwd`, `timeout_s`, plus the registry preset on the
//! fetching step and `network: none` on the test step; nothing else. Outside, the same line
//! runs under `setpriv` in the same bare environment (PATH, HOME, LANG) with a home of its
//! own. Both keep their homes (the package caches) under `target/acceptance`, so a second run
//! fetches little; the workspaces are made afresh every run.
//!
//! A registry that does not answer from this machine is skipped with a line saying so; a
//! project whose counts or exit status differ fails the suite.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The unprivileged user the suite runs as.
const NOBODY: u32 = 65534;
/// The bare environment's PATH.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Longest step, in seconds (the request's maximum).
const STEP_TIMEOUT_S: u32 = 600;

/// One project of tests/acceptance/projects.toml.
struct Project {
    name: String,
    registry: String,
    counts: String,
    fetch: String,
    test: String,
}

/// What one run of a project's tests gave.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// The test step's exit status (`None`: it did not run, the fetch failed).
    status: Option<i64>,
    passed: u64,
    failed: u64,
    /// Errors and skips as the runner counts them.
    other: u64,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            None => write!(f, "fetch failed"),
            Some(s) => write!(
                f,
                "{} passed, {} failed, {} other, exit {s}",
                self.passed, self.failed, self.other
            ),
        }
    }
}

/// Where the suite keeps its state (`target/acceptance`).
struct Dirs {
    base: PathBuf,
}

impl Dirs {
    /// The user's directory (0700, uid 65534) holding the sandbox's data and the outside home.
    fn user(&self) -> PathBuf {
        self.base.join("nobody")
    }
    fn workspace(&self, project: &str, side: &str) -> PathBuf {
        let slug: String = project
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.user().join("ws").join(slug).join(side)
    }
}

/// Runs the suite; `only` restricts it to projects whose name contains it.
pub fn run(root: &Path, only: Option<&str>) -> Result<()> {
    // The owner of /proc/self is this process's effective uid.
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self")?.uid() != 0 {
        println!(
            "acceptance: SKIPPED: the suite runs the projects as uid {NOBODY} through setpriv, \
             which needs root"
        );
        return Ok(());
    }
    let projects = load(&root.join("tests/acceptance/projects.toml"))?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "-q", "-p", "sandbox-host", "--bin", "sandbox"])
        .current_dir(root)
        .status()?;
    if !status.success() {
        bail!("building sandbox failed");
    }
    let sandbox = target.join("debug/sandbox");
    let dirs = Dirs {
        base: target.join("acceptance"),
    };
    prepare(&dirs)?;
    let toolchain = lend_toolchain(&dirs)?;
    if let Some(t) = &toolchain {
        println!(
            "acceptance: the Rust toolchain uid {NOBODY} runs: {}",
            t.display()
        );
    }
    let mut rows = Vec::new();
    let mut differ = Vec::new();
    for reg in ["pypi", "npm", "crates"] {
        let chosen: Vec<&Project> = projects
            .iter()
            .filter(|p| p.registry == reg && only.is_none_or(|o| p.name.contains(o)))
            .collect();
        if chosen.is_empty() {
            continue;
        }
        if let Err(why) = registry_answers(reg) {
            println!(
                "acceptance: SKIPPED {reg} ({} projects): {why}",
                chosen.len()
            );
            continue;
        }
        if reg == "crates" && toolchain.is_none() {
            println!(
                "acceptance: SKIPPED crates: no Rust toolchain uid {NOBODY} can run (none \
                 found with `rustc --print sysroot`, and no hard-linked copy could be made)"
            );
            continue;
        }
        for p in chosen {
            let started = std::time::Instant::now();
            let tool = toolchain.as_deref().unwrap_or(Path::new("/nonexistent"));
            // The two sides share nothing (workspaces, homes) and mostly wait on the network:
            // run at once, they take the time of the slower.
            let (inside, outside) = std::thread::scope(|s| {
                let inside = s.spawn(|| project(&dirs, p, tool, Some(&sandbox)));
                let outside = project(&dirs, p, tool, None);
                (inside.join().expect("the inside run panicked"), outside)
            });
            let (inside, outside) = (inside?, outside?);
            let same = inside == outside && inside.status.is_some();
            println!(
                "acceptance: {} {}: inside {inside}; outside {outside} ({:.0} s)",
                if same { "SAME" } else { "DIFFERS" },
                p.name,
                started.elapsed().as_secs_f64()
            );
            if !same {
                differ.push(p.name.clone());
            }
            rows.push(format!(
                "| {} | {} | {inside} | {outside} | {} |",
                p.name,
                p.registry,
                if same { "same" } else { "differs" }
            ));
        }
    }
    let table = format!(
        "| project | registry | inside | outside | |\n|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    std::fs::write(dirs.base.join("results.md"), &table)?;
    println!("{table}");
    if !differ.is_empty() {
        bail!(
            "acceptance: {} project(s) differ inside the sandbox: {}",
            differ.len(),
            differ.join(", ")
        );
    }
    Ok(())
}

/// Reads the project list.
fn load(file: &Path) -> Result<Vec<Project>> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    let table: toml::Table = toml::from_str(&text).with_context(|| file.display().to_string())?;
    let list = table
        .get("project")
        .and_then(|p| p.as_array())
        .context("projects.toml: no [[project]]")?;
    list.iter()
        .map(|p| {
            let field = |k: &str| {
                p.get(k)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .with_context(|| format!("projects.toml: a project without `{k}`"))
            };
            Ok(Project {
                name: field("name")?,
                registry: field("registry")?,
                counts: field("counts")?,
                fetch: field("fetch")?,
                test: field("test")?,
            })
        })
        .collect()
}

/// Makes `target/acceptance/nobody` (0700, uid 65534) and its data and home directories.
fn prepare(dirs: &Dirs) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&dirs.base)?;
    std::fs::set_permissions(&dirs.base, std::fs::Permissions::from_mode(0o755))?;
    let user = dirs.user();
    for d in [
        user.clone(),
        user.join("data"),
        user.join("home"),
        user.join("ws"),
    ] {
        std::fs::create_dir_all(&d)?;
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY))?;
    }
    std::fs::set_permissions(&user, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// The Rust toolchain's bin directory as uid 65534 can run it: the active sysroot itself when
/// that user can, else a hard-linked copy under `target/acceptance` (rustup's lives under
/// /root; a hard link costs no space and the files stay root's, read-only to that user).
fn lend_toolchain(dirs: &Dirs) -> Result<Option<PathBuf>> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .env_remove("RUSTC")
        .output();
    let Ok(out) = out else { return Ok(None) };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !sysroot.join("bin/cargo").is_file() {
        return Ok(None);
    }
    if as_nobody(&[
        sysroot.join("bin/cargo").to_str().unwrap_or(""),
        "--version",
    ]) {
        return Ok(Some(sysroot.join("bin")));
    }
    let copy = dirs.base.join("toolchain");
    let name = sysroot.file_name().unwrap_or_default();
    let lent = copy.join(name);
    if !lent.join("bin/cargo").is_file() {
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy)?;
        let ok = Command::new("cp")
            .arg("-al")
            .arg(&sysroot)
            .arg(&copy)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Ok(None);
        }
    }
    let bin = lent.join("bin");
    Ok(as_nobody(&[bin.join("cargo").to_str().unwrap_or(""), "--version"]).then_some(bin))
}

/// Whether `argv` succeeds as uid 65534, started by a shell of that user (`setpriv` itself
/// finds the program before it drops root, so a direct start proves nothing about the path).
fn as_nobody(argv: &[&str]) -> bool {
    let line = r#"exec "$@""#;
    let mut shell = vec!["/bin/sh", "-c", line, "sh"];
    shell.extend_from_slice(argv);
    nobody(&shell, Path::new("/"), Path::new("/nonexistent"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `argv` as uid 65534 in the bare environment with `home`, in `cwd`.
fn nobody(argv: &[&str], cwd: &Path, home: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
    ])
    .args(argv)
    .env_clear()
    .env("PATH", PATH)
    .env("LANG", "C.UTF-8")
    .env("HOME", home)
    .current_dir(cwd)
    .stdin(Stdio::null());
    c
}

/// Whether the registry answers from this machine (outside any sandbox).
fn registry_answers(reg: &str) -> Result<(), String> {
    let url = match reg {
        "pypi" => "https://pypi.org/simple/pip/",
        "npm" => "https://registry.npmjs.org/tape",
        _ => "https://index.crates.io/config.json",
    };
    let ok = Command::new("curl")
        .args(["-fsS", "-o", "/dev/null", "--max-time", "15", url])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(format!("{url} does not answer from this machine"))
    }
}

/// Fetches and tests `p` in a fresh workspace, inside the sandbox (`Some(binary)`) or
/// outside; what the tests gave.
fn project(dirs: &Dirs, p: &Project, toolchain: &Path, sandbox: Option<&Path>) -> Result<Outcome> {
    let side = if sandbox.is_some() {
        "inside"
    } else {
        "outside"
    };
    let ws = dirs.workspace(&p.name, side);
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(&ws)?;
    for d in [ws.as_path(), ws.parent().unwrap_or(&ws)] {
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY))?;
    }
    let tool = toolchain.display().to_string();
    let fetch_line = p.fetch.replace("$TOOLCHAIN", &tool);
    let test_line = p.test.replace("$TOOLCHAIN", &tool);
    let preset = format!("@{}", p.registry);
    let (fetch, test) = match sandbox {
        Some(bin) => {
            let fetch = serde_json::json!({
                "argv": ["/bin/bash", "-c", fetch_line], "profile": "shell-network",
                "cwd": ws, "timeout_s": STEP_TIMEOUT_S, "allow_domains": [preset],
            });
            let test = serde_json::json!({
                "argv": ["/bin/bash", "-c", test_line], "profile": "shell",
                "cwd": ws, "timeout_s": STEP_TIMEOUT_S, "network": "none",
            });
            (
                timed(|| inside(bin, dirs, &fetch))?,
                timed(|| inside(bin, dirs, &test))?,
            )
        }
        None => {
            let home = dirs.user().join("home");
            (
                timed(|| outside(&ws, &home, &fetch_line))?,
                timed(|| outside(&ws, &home, &test_line))?,
            )
        }
    };
    let log = dirs.workspace(&p.name, &format!("{side}.log"));
    std::fs::write(
        &log,
        format!(
            "== fetch (exit {:?}, {:.1} s)\n{}\n== test (exit {:?}, {:.1} s)\n{}\n",
            fetch.0, fetch.2, fetch.1, test.0, test.2, test.1
        ),
    )?;
    if fetch.0 != Some(0) {
        println!(
            "acceptance: {} {side}: the fetching step failed (exit {:?}); see {}",
            p.name,
            fetch.0,
            log.display()
        );
        return Ok(Outcome {
            status: None,
            passed: 0,
            failed: 0,
            other: 0,
        });
    }
    let (passed, failed, other) = counts(&p.counts, &test.1);
    Ok(Outcome {
        status: test.0,
        passed,
        failed,
        other,
    })
}

/// `step`'s result with its wall-clock seconds.
fn timed(
    step: impl FnOnce() -> Result<(Option<i64>, String)>,
) -> Result<(Option<i64>, String, f64)> {
    let start = std::time::Instant::now();
    let (status, text) = step()?;
    Ok((status, text, start.elapsed().as_secs_f64()))
}

/// One request through `sandbox exec --json` as uid 65534 with the suite's data directory:
/// the exit status and the output (stdout, stderr and the result's warnings).
fn inside(bin: &Path, dirs: &Dirs, request: &serde_json::Value) -> Result<(Option<i64>, String)> {
    use std::io::Write;
    let mut c = nobody(
        &[bin.to_str().unwrap_or(""), "exec", "--json"],
        Path::new("/"),
        Path::new("/nonexistent"),
    );
    c.env("XDG_DATA_HOME", dirs.user().join("data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().context("starting sandbox exec --json")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(request.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "sandbox exec --json gave no result: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    if let Some(e) = v.get("error") {
        bail!("the request was refused: {e}");
    }
    let text = format!(
        "{}{}{}",
        v["stdout"].as_str().unwrap_or(""),
        v["stderr"].as_str().unwrap_or(""),
        v["warnings"]
            .as_array()
            .map(|w| w
                .iter()
                .filter_map(|l| l.as_str())
                .map(|l| format!("{l}\n"))
                .collect::<String>())
            .unwrap_or_default()
    );
    Ok((v["exit_code"].as_i64(), text))
}

/// `line` under `bash -c` as uid 65534 in `ws` with `home`: the exit status and the output.
fn outside(ws: &Path, home: &Path, line: &str) -> Result<(Option<i64>, String)> {
    let out = nobody(&["/bin/bash", "-c", line], ws, home)
        .output()
        .context("starting bash as uid 65534")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.code().map(i64::from), text))
}

/// Passed, failed and other counts from a test runner's output.
fn counts(kind: &str, text: &str) -> (u64, u64, u64) {
    // The number before `word` in `line` (`12 passed`), 0 when absent.
    let before = |line: &str, word: &str| -> u64 {
        let words: Vec<&str> = line
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .filter(|w| w[1].trim_end_matches('.') == word)
            .filter_map(|w| w[0].parse::<u64>().ok())
            .sum()
    };
    match kind {
        "pytest" => {
            // The summary: `3 failed, 120 passed, 2 skipped, 1 error in 0.5s`.
            let line = text
                .lines()
                .rev()
                .find(|l| l.contains(" in ") && (l.contains("passed") || l.contains("failed")))
                .unwrap_or("");
            let other = ["skipped", "error", "errors", "xfailed", "xpassed"]
                .iter()
                .map(|w| before(line, w))
                .sum();
            (before(line, "passed"), before(line, "failed"), other)
        }
        "tape" => {
            let n = |tag: &str| {
                text.lines()
                    .filter_map(|l| l.trim().strip_prefix(tag))
                    .filter_map(|r| r.trim().parse::<u64>().ok())
                    .sum()
            };
            (n("# pass"), n("# fail"), n("# skip"))
        }
        _ => {
            // cargo: every `test result: ok. 12 passed; 0 failed; 1 ignored; ...` line.
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("test result:"))
                .collect();
            let sum = |w: &str| lines.iter().map(|l| before(l, w)).sum();
            (sum("passed"), sum("failed"), sum("ignored"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::counts;

    #[test]
    fn runner_summaries_are_counted() {
        assert_eq!(
            counts("pytest", "....\n3 failed, 120 passed, 2 skipped in 0.51s\n"),
            (120, 3, 2)
        );
        assert_eq!(
            counts("pytest", "===== 7 passed in 1.2s =====\n"),
            (7, 0, 0)
        );
        assert_eq!(
            counts("tape", "ok 1\n# tests 5\n# pass  4\n# fail  1\n"),
            (4, 1, 0)
        );
        assert_eq!(
            counts(
                "cargo",
                "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured\n\
                 test result: FAILED. 3 passed; 2 failed; 0 ignored\n"
            ),
            (15, 2, 1)
        );
        assert_eq!(counts("pytest", "no tests ran"), (0, 0, 0));
    }
}
