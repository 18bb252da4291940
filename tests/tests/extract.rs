//! Extraction of the embedded preload: concurrency, tampering, ownership, symlinks, unsafe
//! directories, paths glibc would split, noexec mounts, operator-given libraries.

use sandbox_host::embedded::LIBSANDBOX;
use sandbox_host::extract::{self, ExtractError};
use sandbox_tests::{chmod, compile_hello, Build, Tmpfs};
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const EXTRACT_ONCE: &str = env!("CARGO_BIN_EXE_extract_once");

/// A fresh private directory (mode 0700, under the sticky /tmp).
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sandbox-test-")
        .tempdir()
        .unwrap()
}

/// Asserts `path` is a regular file holding exactly the embedded library, mode 0644, ours.
fn assert_valid(path: &Path) {
    let meta = fs::symlink_metadata(path).unwrap();
    assert!(
        meta.file_type().is_file(),
        "{} is not a regular file",
        path.display()
    );
    assert_eq!(meta.mode() & 0o7777, 0o644, "{}", path.display());
    // SAFETY: geteuid has no preconditions and cannot fail.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    assert!(
        fs::read(path).unwrap() == LIBSANDBOX,
        "{} differs from the embedded library",
        path.display()
    );
}

/// Runs `/bin/true` with `LD_PRELOAD=lib` and returns the loader's complaints (stderr).
fn preload_stderr(lib: &Path) -> String {
    let out = Command::new("/bin/true")
        .env("LD_PRELOAD", lib)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the `extract_once` helper with a controlled environment; returns its stdout path.
fn extract_once(runtime: Option<&Path>, cache: &Path) -> Command {
    let mut cmd = Command::new(EXTRACT_ONCE);
    cmd.env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache)
        .env("HOME", cache);
    if let Some(r) = runtime {
        cmd.env("XDG_RUNTIME_DIR", r);
    }
    cmd
}

fn stdout_path(out: &std::process::Output) -> PathBuf {
    assert!(
        out.status.success(),
        "extract_once failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout.clone()).unwrap().trim_end())
}

/// Runs 20 `extract_once` processes at once; returns the paths they printed.
fn extract_concurrently(runtime: &Path, cache: &Path) -> Vec<PathBuf> {
    let children: Vec<_> = (0..20)
        .map(|_| {
            extract_once(Some(runtime), cache)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| stdout_path(&c.wait_with_output().unwrap()))
        .collect()
}

#[test]
fn twenty_processes_extract_one_valid_file() {
    let runtime = private_dir();
    let cache = private_dir();
    let dir = runtime.path().join("sandbox");
    let expected = dir.join(extract::file_name());
    for round in ["fresh", "tampered"] {
        if round == "tampered" {
            fs::write(&expected, "tampered").unwrap();
        }
        let paths = extract_concurrently(runtime.path(), cache.path());
        assert!(
            paths.iter().all(|p| *p == expected),
            "{round}: paths differ: {paths:?}"
        );
        assert_valid(&expected);
        let entries: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries.len(), 1, "{round}: leftover files: {entries:?}");
    }
    let dir_meta = fs::symlink_metadata(&dir).unwrap();
    assert_eq!(dir_meta.mode() & 0o7777, 0o700);
    let complaints = preload_stderr(&expected);
    assert!(
        !complaints.contains("ld.so"),
        "the extracted library does not load: {complaints}"
    );
}

#[test]
fn cache_dir_is_used_without_runtime_dir() {
    let cache = private_dir();
    let path = stdout_path(&extract_once(None, cache.path()).output().unwrap());
    assert_eq!(
        path,
        cache.path().join("sandbox").join(extract::file_name())
    );
    assert_valid(&path);
}

#[test]
fn world_writable_runtime_dir_is_skipped() {
    let runtime = private_dir();
    let cache = private_dir();
    let bad = runtime.path().join("sandbox");
    fs::create_dir(&bad).unwrap();
    chmod(&bad, 0o777);
    let path = stdout_path(
        &extract_once(Some(runtime.path()), cache.path())
            .output()
            .unwrap(),
    );
    assert!(path.starts_with(cache.path()), "used {}", path.display());
    assert_eq!(
        fs::read_dir(&bad).unwrap().count(),
        0,
        "wrote into the world-writable directory"
    );
}

#[test]
fn world_writable_dir_is_refused() {
    let dir = private_dir();
    chmod(dir.path(), 0o777);
    let err = extract::extract_into(dir.path()).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafeDirectory { .. }), "{err}");
    chmod(dir.path(), 0o770);
    let err = extract::extract_into(dir.path()).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafeDirectory { .. }), "{err}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn symlinked_dir_is_refused() {
    let dir = private_dir();
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    let link = dir.path().join("link");
    symlink(&real, &link).unwrap();
    let err = extract::extract_into(&link).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafeDirectory { .. }), "{err}");
}

#[test]
fn foreign_owned_dir_is_refused() {
    let dir = private_dir();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    let err = extract::extract_into(dir.path()).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafeDirectory { .. }), "{err}");
}

#[test]
fn tampered_file_is_replaced() {
    let dir = private_dir();
    let target = dir.path().join(extract::file_name());
    let mut fake = LIBSANDBOX.to_vec();
    let mid = fake.len() / 2;
    fake[mid] ^= 0xff;
    fs::write(&target, &fake).unwrap();
    chmod(&target, 0o644);
    let path = extract::extract_into(dir.path()).unwrap();
    assert_eq!(path, target);
    assert_valid(&path);
}

#[test]
fn truncated_file_is_replaced() {
    let dir = private_dir();
    let target = dir.path().join(extract::file_name());
    fs::write(&target, &LIBSANDBOX[..100]).unwrap();
    chmod(&target, 0o644);
    assert_valid(&extract::extract_into(dir.path()).unwrap());
}

#[test]
fn wrong_mode_is_replaced() {
    for mode in [0o600, 0o666, 0o755, 0o4644] {
        let dir = private_dir();
        let target = dir.path().join(extract::file_name());
        fs::write(&target, LIBSANDBOX).unwrap();
        chmod(&target, mode);
        let path = extract::extract_into(dir.path()).unwrap();
        assert_valid(&path);
    }
}

#[test]
fn foreign_owned_file_is_refused() {
    let dir = private_dir();
    let target = dir.path().join(extract::file_name());
    fs::write(&target, LIBSANDBOX).unwrap();
    chmod(&target, 0o644);
    std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
    let err = extract::extract_into(dir.path()).unwrap_err();
    assert!(
        matches!(err, ExtractError::ForeignOwner { uid: 65534, .. }),
        "{err}"
    );
    assert_eq!(
        fs::metadata(&target).unwrap().uid(),
        65534,
        "the foreign file was replaced"
    );
}

#[test]
fn planted_symlink_is_not_followed() {
    let dir = private_dir();
    let elsewhere = private_dir();
    let victim = elsewhere.path().join("victim");
    fs::write(&victim, "do not touch").unwrap();
    let target = dir.path().join(extract::file_name());
    symlink(&victim, &target).unwrap();
    let path = extract::extract_into(dir.path()).unwrap();
    assert_eq!(path, target);
    assert_valid(&path);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "do not touch");
}

#[test]
fn symlink_to_a_valid_copy_is_replaced() {
    let dir = private_dir();
    let elsewhere = private_dir();
    let copy = elsewhere.path().join("copy.so");
    fs::write(&copy, LIBSANDBOX).unwrap();
    chmod(&copy, 0o644);
    let target = dir.path().join(extract::file_name());
    symlink(&copy, &target).unwrap();
    let path = extract::extract_into(dir.path()).unwrap();
    assert_valid(&path);
}

#[test]
fn space_or_colon_in_path_is_refused() {
    for name in ["with space", "with:colon"] {
        let parent = private_dir();
        let dir = parent.path().join(name);
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o700);
        let err = extract::extract_into(&dir).unwrap_err();
        assert!(
            matches!(err, ExtractError::UnsafePathChars { .. }),
            "{name}: {err}"
        );
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    }
}

#[test]
fn space_in_runtime_dir_falls_back() {
    let parent = private_dir();
    let runtime = parent.path().join("run time");
    fs::create_dir(&runtime).unwrap();
    chmod(&runtime, 0o700);
    let cache = private_dir();
    let path = stdout_path(&extract_once(Some(&runtime), cache.path()).output().unwrap());
    assert!(path.starts_with(cache.path()), "used {}", path.display());
}

#[test]
fn noexec_mount_is_refused() {
    let dir = private_dir();
    let mnt = Tmpfs::mount(dir.path(), "noexec,mode=0700");
    let err = extract::extract_into(mnt.path()).unwrap_err();
    assert!(matches!(err, ExtractError::Noexec { .. }), "{err}");

    // Why: glibc cannot map a library from a noexec mount and runs the program without it.
    let lib = mnt.path().join("copy.so");
    fs::write(&lib, LIBSANDBOX).unwrap();
    chmod(&lib, 0o644);
    let complaints = preload_stderr(&lib);
    assert!(
        complaints.contains("cannot be preloaded"),
        "expected ld.so to ignore it: {complaints}"
    );
    let err = extract::explicit(&lib).unwrap_err();
    assert!(matches!(err, ExtractError::Noexec { .. }), "{err}");
}

#[test]
fn exec_mount_is_accepted() {
    let dir = private_dir();
    let mnt = Tmpfs::mount(dir.path(), "exec,mode=0700");
    assert_valid(&extract::extract_into(mnt.path()).unwrap());
}

#[test]
fn explicit_accepts_an_extracted_library() {
    let dir = private_dir();
    let lib = extract::extract_into(dir.path()).unwrap();
    assert_eq!(extract::explicit(&lib).unwrap(), lib);
}

#[test]
fn explicit_refuses_what_would_not_load() {
    let dir = private_dir();
    let bad = |p: &Path| {
        let err = extract::explicit(p).unwrap_err();
        assert!(
            matches!(err, ExtractError::BadLibrary { .. }),
            "{}: {err}",
            p.display()
        );
    };
    let text = dir.path().join("text.so");
    fs::write(&text, "not a library").unwrap();
    bad(&text);
    bad(&compile_hello(dir.path(), "prog", Build::Dynamic));
    bad(&compile_hello(dir.path(), "static-pie", Build::StaticPie));
    bad(&compile_c_lib32(dir.path()));
    bad(dir.path());
    let missing = extract::explicit(&dir.path().join("missing.so")).unwrap_err();
    assert!(matches!(missing, ExtractError::Io { .. }), "{missing}");

    let spaced = dir.path().join("a b.so");
    fs::write(&spaced, LIBSANDBOX).unwrap();
    let err = extract::explicit(&spaced).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafePathChars { .. }), "{err}");

    let own = compile_c_lib(dir.path());
    assert_eq!(
        extract::explicit(&own).unwrap(),
        own,
        "a 64-bit shared object is accepted"
    );
}

fn compile_c_lib(dir: &Path) -> PathBuf {
    sandbox_tests::compile_c(
        dir,
        "lib64.so",
        "int f(void) { return 1; }\n",
        Build::Shared,
    )
}

fn compile_c_lib32(dir: &Path) -> PathBuf {
    sandbox_tests::compile_c(
        dir,
        "lib32.so",
        "int f(void) { return 1; }\n",
        Build::Shared32,
    )
}

#[test]
fn extract_to_writes_a_0644_copy() {
    let dir = private_dir();
    let dest = dir.path().join("libsandbox.so");
    fs::write(&dest, "old").unwrap();
    extract::extract_to(&dest).unwrap();
    assert_valid(&dest);
    assert_eq!(extract::explicit(&dest).unwrap(), dest);

    let err = extract::extract_to(&dir.path().join("missing/libsandbox.so")).unwrap_err();
    assert!(matches!(err, ExtractError::MissingParent { .. }), "{err}");
}
