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

/// Asserts `path` is a regular file holding exactly the embedded library, mode 0444, ours.
fn assert_valid(path: &Path) {
    let meta = fs::symlink_metadata(path).unwrap();
    assert!(
        meta.file_type().is_file(),
        "{} is not a regular file",
        path.display()
    );
    assert_eq!(meta.mode() & 0o7777, 0o444, "{}", path.display());
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
    chmod(&target, 0o444);
    let path = extract::extract_into(dir.path()).unwrap();
    assert_eq!(path, target);
    assert_valid(&path);
}

#[test]
fn truncated_file_is_replaced() {
    let dir = private_dir();
    let target = dir.path().join(extract::file_name());
    fs::write(&target, &LIBSANDBOX[..100]).unwrap();
    chmod(&target, 0o444);
    assert_valid(&extract::extract_into(dir.path()).unwrap());
}

#[test]
fn wrong_mode_is_replaced() {
    // 0644 is what earlier versions wrote: a copy its owner can open for writing is replaced.
    for mode in [0o644, 0o600, 0o666, 0o755, 0o4644, 0o4444, 0o1444, 0o400] {
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
    chmod(&target, 0o444);
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
    chmod(&copy, 0o444);
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
    let err = extract::explicit(&lib, None).unwrap_err();
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
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
}

#[test]
fn explicit_refuses_what_would_not_load() {
    let dir = private_dir();
    let bad = |p: &Path| {
        let err = extract::explicit(p, None).unwrap_err();
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
    let missing = extract::explicit(&dir.path().join("missing.so"), None).unwrap_err();
    assert!(matches!(missing, ExtractError::Io { .. }), "{missing}");

    let spaced = dir.path().join("a b.so");
    fs::write(&spaced, LIBSANDBOX).unwrap();
    let err = extract::explicit(&spaced, None).unwrap_err();
    assert!(matches!(err, ExtractError::UnsafePathChars { .. }), "{err}");

    // Another 64-bit shared object is accepted only with its hash (libsandboxSha256).
    let own = compile_c_lib(dir.path());
    bad(&own);
    assert_eq!(
        extract::explicit(&own, Some(&sha256_hex(&own))).unwrap(),
        own,
        "a 64-bit shared object is accepted with its hash"
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
fn extract_to_writes_a_0444_copy() {
    let dir = private_dir();
    let dest = dir.path().join("libsandbox.so");
    fs::write(&dest, "old").unwrap();
    extract::extract_to(&dest).unwrap();
    assert_valid(&dest);
    assert_eq!(extract::explicit(&dest, None).unwrap(), dest);

    let err = extract::extract_to(&dir.path().join("missing/libsandbox.so")).unwrap_err();
    assert!(matches!(err, ExtractError::MissingParent { .. }), "{err}");
}

/// The SHA-256 of a file as `sha256sum` prints it.
fn sha256_hex(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Runs `sh -c SCRIPT FILE` as uid/gid 65534 in a bare environment; returns whether it
/// succeeded.
fn as_nobody_sh(script: &str, file: &Path) -> bool {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(["/bin/sh", "-c", script])
        .arg(file)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("setpriv (util-linux)")
        .success()
}

/// A private directory owned by uid/gid 65534 (mode 0700).
fn nobody_dir() -> tempfile::TempDir {
    let dir = private_dir();
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
    dir
}

/// Appends to the file as its owner: what a sandboxed program that may write files tries.
const APPEND: &str = "printf x >> \"$0\"";

#[test]
fn the_extracted_library_cannot_be_opened_for_writing_by_its_owner() {
    // Extracted by uid 65534 into its own cache directory.
    let cache = nobody_dir();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(EXTRACT_ONCE)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_CACHE_HOME", cache.path())
        .env("HOME", cache.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let lib = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let meta = fs::metadata(&lib).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (65534, 0o444));
    // Control: a 0644 copy of the same user (what was extracted before) is rewritten.
    let copy = lib.with_file_name("writable-copy.so");
    fs::copy(&lib, &copy).unwrap();
    std::os::unix::fs::chown(&copy, Some(65534), Some(65534)).unwrap();
    chmod(&copy, 0o644);
    assert!(
        as_nobody_sh(APPEND, &copy),
        "control: the 0644 copy is writable"
    );
    assert_ne!(fs::read(&copy).unwrap(), LIBSANDBOX);
    // The extracted library is not.
    assert!(!as_nobody_sh(APPEND, &lib), "the 0444 library was written");
    assert_eq!(fs::read(&lib).unwrap(), LIBSANDBOX);
}

#[test]
fn a_library_left_writable_is_re_created_read_only() {
    let dir = private_dir();
    let first = extract::extract_into(dir.path()).unwrap();
    chmod(&first, 0o644);
    let ino = fs::metadata(&first).unwrap().ino();
    let again = extract::extract_into(dir.path()).unwrap();
    assert_valid(&again);
    assert_ne!(
        fs::metadata(&again).unwrap().ino(),
        ino,
        "re-created (renamed into place), not chmod-ed"
    );
}

/// Asserts `explicit` refuses `lib` with a `BadLibrary` whose reason contains `why`.
fn refused(lib: &Path, sha: Option<&str>, why: &str) {
    let err = extract::explicit(lib, sha).unwrap_err();
    assert!(
        matches!(err, ExtractError::BadLibrary { .. }) && err.to_string().contains(why),
        "{}: expected `{why}`, got: {err}",
        lib.display()
    );
    assert_eq!(err.to_string().lines().count(), 1, "{err}");
}

/// A copy of the embedded library in `dir` (mode 0644, owned by the caller).
fn copy_in(dir: &Path, name: &str) -> PathBuf {
    let lib = dir.join(name);
    fs::write(&lib, LIBSANDBOX).unwrap();
    chmod(&lib, 0o644);
    lib
}

#[test]
fn explicit_refuses_a_symlink() {
    let dir = private_dir();
    let lib = copy_in(dir.path(), "real.so");
    let link = dir.path().join("link.so");
    symlink(&lib, &link).unwrap();
    refused(&link, None, "is a symlink");
    // Control: the file itself is accepted.
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
}

#[test]
fn explicit_refuses_a_file_others_can_write() {
    let dir = private_dir();
    chmod(dir.path(), 0o755);
    let lib = copy_in(dir.path(), "lib.so");
    for mode in [0o666, 0o646, 0o664] {
        chmod(&lib, mode);
        refused(&lib, None, "lets group or others change it");
    }
    // Control: the attack works: uid 65534 rewrites a world-writable library.
    chmod(&lib, 0o666);
    assert!(
        as_nobody_sh(APPEND, &lib),
        "control: world-writable is writable"
    );
    fs::write(&lib, LIBSANDBOX).unwrap();
    chmod(&lib, 0o644);
    assert!(!as_nobody_sh(APPEND, &lib));
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
}

#[test]
fn explicit_refuses_a_directory_others_can_write() {
    let outer = private_dir();
    let dir = outer.path().join("shared");
    fs::create_dir(&dir).unwrap();
    let lib = copy_in(&dir, "lib.so");
    chmod(&dir, 0o777);
    refused(&lib, None, "lets group or others replace the library");
    // Control: the attack works: uid 65534 replaces the library in that directory.
    chmod(outer.path(), 0o755);
    assert!(
        as_nobody_sh("rm -f \"$0\" && printf x > \"$0\"", &lib),
        "control: others replace it"
    );
    assert_eq!(fs::read(&lib).unwrap(), b"x");
    fs::remove_file(&lib).unwrap();
    let lib = copy_in(&dir, "lib.so");
    // Group-writable is refused too; sticky (like /tmp) is accepted: others cannot replace
    // an entry that is not theirs.
    chmod(&dir, 0o775);
    refused(&lib, None, "lets group or others replace the library");
    chmod(&dir, 0o1777);
    assert!(!as_nobody_sh("rm -f \"$0\" && printf x > \"$0\"", &lib));
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
    // A parent further up counts the same way.
    chmod(&dir, 0o755);
    chmod(outer.path(), 0o777);
    refused(&lib, None, "lets group or others replace the library");
    chmod(outer.path(), 0o700);
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
}

#[test]
fn explicit_refuses_a_foreign_owner() {
    let dir = private_dir();
    chmod(dir.path(), 0o755);
    let lib = copy_in(dir.path(), "lib.so");
    std::os::unix::fs::chown(&lib, Some(65534), Some(65534)).unwrap();
    refused(&lib, None, "owned by uid 65534, not by root or the caller");
    // Control: its owner can rewrite it.
    assert!(as_nobody_sh(APPEND, &lib), "control: the owner rewrites it");
    fs::write(&lib, LIBSANDBOX).unwrap();
    std::os::unix::fs::chown(&lib, Some(0), Some(0)).unwrap();
    assert_eq!(extract::explicit(&lib, None).unwrap(), lib);
    // A directory of another user on the way is refused as well.
    let theirs = dir.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    let lib = copy_in(&theirs, "lib.so");
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    refused(&lib, None, "is owned by uid 65534");
}

#[test]
fn explicit_refuses_a_wrong_hash_unless_opted_in() {
    let dir = private_dir();
    let mut changed = LIBSANDBOX.to_vec();
    let last = changed.len() - 1;
    changed[last] ^= 0xff;
    let lib = dir.path().join("changed.so");
    fs::write(&lib, &changed).unwrap();
    chmod(&lib, 0o644);
    // Control: the change does not stop glibc from loading it.
    assert_eq!(preload_stderr(&lib), "", "the changed library still loads");
    refused(&lib, None, "is not the embedded library's");
    let sha = sha256_hex(&lib);
    assert_eq!(extract::explicit(&lib, Some(&sha)).unwrap(), lib);
    assert_eq!(
        extract::explicit(&lib, Some(&sha.to_uppercase())).unwrap(),
        lib
    );
    // Opted in, the hash must match exactly; the embedded library is then refused as well.
    let embedded = copy_in(dir.path(), "embedded.so");
    refused(&embedded, Some(&sha), "differs from libsandboxSha256");
    for hostile in ["", "abc", &"g".repeat(64), &format!("{sha}0"), &sha[..63]] {
        refused(&lib, Some(hostile), "is not 64 hexadecimal digits");
    }
}

#[test]
fn explicit_returns_the_canonical_path() {
    let dir = private_dir();
    let lib = copy_in(dir.path(), "lib.so");
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    let dotted = sub.join("..").join("lib.so");
    assert_eq!(extract::explicit(&dotted, None).unwrap(), lib);
    // A symlinked directory is resolved: LD_PRELOAD gets the real directories.
    let linked = dir.path().join("linked");
    symlink(dir.path(), &linked).unwrap();
    assert_eq!(
        extract::explicit(&linked.join("lib.so"), None).unwrap(),
        lib
    );
}
