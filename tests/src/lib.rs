//! Shared helpers for the integration tests: real compilers, real mounts, fresh directories.
//!
//! Helpers panic with a clear message when a tool is missing: CI installs them
//! (`apt-get install gcc gcc-multilib musl-tools`), and a skipped test must never look like a
//! passing one.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How to build a test program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// `gcc` with its defaults: a dynamic PIE for glibc.
    Dynamic,
    /// `gcc -static`.
    Static,
    /// `gcc -static-pie`.
    StaticPie,
    /// `gcc -m32` (needs gcc-multilib): a 32-bit dynamic program.
    M32,
    /// `musl-gcc` (needs musl-tools): a dynamic program for musl's loader.
    Musl,
    /// `musl-gcc -static`.
    MuslStatic,
    /// `gcc -shared -fPIC`: a shared library.
    Shared,
    /// `gcc -m32 -shared -fPIC`: a 32-bit shared library.
    Shared32,
}

impl Build {
    /// The compiler and its flags.
    fn command(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Build::Dynamic => ("gcc", &[]),
            Build::Static => ("gcc", &["-static"]),
            Build::StaticPie => ("gcc", &["-static-pie"]),
            Build::M32 => ("gcc", &["-m32"]),
            Build::Musl => ("musl-gcc", &[]),
            Build::MuslStatic => ("musl-gcc", &["-static"]),
            Build::Shared => ("gcc", &["-shared", "-fPIC"]),
            Build::Shared32 => ("gcc", &["-m32", "-shared", "-fPIC"]),
        }
    }
}

/// A C program that prints a line and exits 0.
pub const HELLO_C: &str = "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n";

/// Compiles `source` into `dir/name` as `build` says and returns the output's path. Panics
/// with the compiler's output (or a hint to install it) on failure.
pub fn compile_c(dir: &Path, name: &str, source: &str, build: Build) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap_or_else(|e| panic!("writing {}: {e}", src.display()));
    let out = dir.join(name);
    let (cc, flags) = build.command();
    let result = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output();
    let output = match result {
        Ok(o) => o,
        Err(e) => panic!(
            "cannot run {cc} for a {build:?} test program ({e}); install it: \
             apt-get install gcc gcc-multilib musl-tools"
        ),
    };
    assert!(
        output.status.success(),
        "{cc} {} failed for a {build:?} test program ({}; gcc -m32 needs gcc-multilib, \
         musl-gcc needs musl-tools):\n{}",
        flags.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Compiles [`HELLO_C`] into `dir/name`.
pub fn compile_hello(dir: &Path, name: &str, build: Build) -> PathBuf {
    compile_c(dir, name, HELLO_C, build)
}

/// Writes an executable (mode 0755) file.
pub fn write_executable(path: &Path, contents: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Sets the mode of `path`.
pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// A tmpfs mounted for the duration of a test; unmounted on drop.
#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (for example `noexec,mode=0700`) on the existing
    /// directory `path`. Panics with a clear message when mounting fails (tests run as root).
    pub fn mount(path: &Path, options: &str) -> Tmpfs {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount ({e})"));
        assert!(
            output.status.success(),
            "mount -t tmpfs -o {options} tmpfs {} failed: {}; this test needs root \
             (euid is {})",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim(),
            // SAFETY: geteuid has no preconditions and cannot fail.
            unsafe { libc::geteuid() }
        );
        Tmpfs {
            path: path.to_path_buf(),
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
