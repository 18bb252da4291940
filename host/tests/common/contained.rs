//! What the contained tier's tests share: a directory a user owns outside `/tmp`, `sandbox
//! run` as that user, and a run's output as text for assertion messages.

use super::{command, As, SANDBOX};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};

/// A directory `who` owns, outside `/tmp` (the tier has no private one), mode 0755, removed on
/// drop.
pub fn owned_dir(who: As, prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(d.path(), Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `sandbox run --allow-root ARGS` as `who` in `cwd`, stdin /dev/null.
pub fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    command(who, SANDBOX)
        .arg("run")
        .arg("--allow-root")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("sandbox run")
}

/// The status and both streams of `o`, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Compiles the C program `source` with gcc to `dir/name` (from `dir/name.c`), statically
/// linked when asked: the tiers treat static programs apart.
pub fn compile_c(dir: &Path, name: &str, source: &str, static_link: bool) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let mut c = std::process::Command::new("gcc");
    if static_link {
        c.arg("-static");
    }
    let st = c.arg("-o").arg(&out).arg(&src).status().unwrap();
    assert!(st.success(), "gcc {}", src.display());
    out
}
