//! Running a prepared OCI bundle with runc, as the container tests do: the container's
//! output, and the container deleted whatever happened.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether runc is installed (said on stderr when not: the test is skipped); the tests need
/// root to run it.
pub fn available() -> bool {
    if Command::new("runc").arg("--version").output().is_err() {
        eprintln!("skipped: runc is not installed (.ci/packages)");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "runc needs root");
    true
}

/// `runc run` of the bundle in `dir` under a fresh id starting with `prefix`, with `stdin`
/// written to the container (or /dev/null), then `runc delete -f`.
pub fn run(dir: &Path, prefix: &str, stdin: Option<&[u8]>) -> Output {
    static N: AtomicUsize = AtomicUsize::new(0);
    let id = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut cmd = Command::new("runc");
    cmd.args(["run", "--bundle"])
        .arg(dir)
        .arg(&id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = match stdin {
        None => cmd.stdin(Stdio::null()).output().unwrap(),
        Some(input) => {
            use std::io::Write;
            let mut child = cmd.stdin(Stdio::piped()).spawn().unwrap();
            child.stdin.take().unwrap().write_all(input).unwrap();
            child.wait_with_output().unwrap()
        }
    };
    let _ = Command::new("runc").args(["delete", "-f", &id]).output();
    o
}
