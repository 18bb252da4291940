//! The sandbox's own state lives in a private directory of each user, never in one other
//! users may write: another user (uid 65534) can neither deny root the preload route by
//! taking a name in `/tmp` first, nor plant records or symlinks that make a job of root's
//! remove a file root owns. A per-user directory that is not private is refused, naming it.

mod common;

use common::{command, As, SANDBOX};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn chown_nobody(p: &Path) {
    std::os::unix::fs::lchown(p, Some(common::NOBODY), Some(common::NOBODY)).unwrap();
}

/// A shared temporary directory of the test's own (mode 1777, like `/tmp`), for `TMPDIR`.
fn shared_tmp() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    d
}

/// `TMPDIR` in the output of `sandbox env`.
fn env_tmpdir(out: &str) -> PathBuf {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("export TMPDIR='"))
        .unwrap_or_else(|| panic!("no TMPDIR in {out}"));
    PathBuf::from(line.trim_end_matches('\''))
}

/// `sandbox env` as `who` with `TMPDIR` set, through `bash -c` as agents run it.
fn sandbox_env(who: As, tmpdir: &Path, extra: &[(&str, &Path)]) -> Output {
    let mut c = command(who, "/bin/bash");
    // `--quiet`: the once-per-user note of the route would make the first run on a fresh
    // machine differ from the others.
    c.args(["-c", &format!("{SANDBOX} env --quiet")])
        .env("TMPDIR", tmpdir)
        .current_dir(tmpdir);
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn another_user_cannot_deny_the_preload_route_by_taking_its_name_first() {
    let tmp = shared_tmp();
    // Uid 65534 takes the names root's and its own runs used in the shared directory.
    for name in ["sandbox-env-0", "sandbox-0"] {
        let p = tmp.path().join(name);
        fs::create_dir(&p).unwrap();
        chown_nobody(&p);
    }
    // Control: the old name is there, another user's (the route refused such a directory).
    let taken = fs::symlink_metadata(tmp.path().join("sandbox-env-0")).unwrap();
    assert_eq!(taken.uid(), common::NOBODY);
    let o = sandbox_env(As::Root, tmp.path(), &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(err, "");
    assert_eq!(env_tmpdir(&out), Path::new("/run/sandbox/tmp"));
    let m = fs::symlink_metadata("/run/sandbox").unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o700));
    // The other way round: root takes the name uid 65534 (no HOME, no runtime directory)
    // would use in the temporary directory: it gets one of its own beside it.
    for name in ["sandbox-env-65534", "sandbox-65534"] {
        fs::create_dir(tmp.path().join(name)).unwrap();
    }
    let o = sandbox_env(As::Nobody, tmp.path(), &[]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let dir = env_tmpdir(&out);
    let state = dir.parent().unwrap();
    let name = state.file_name().unwrap().to_str().unwrap();
    assert!(
        state.parent() == Some(tmp.path()) && name.starts_with("sandbox-65534."),
        "{dir:?}"
    );
    let m = fs::symlink_metadata(state).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (common::NOBODY, 0o700));
    // A second run finds the same one.
    let o = sandbox_env(As::Nobody, tmp.path(), &[]);
    assert_eq!(env_tmpdir(&text(&o).0), dir);
}

#[test]
fn a_per_user_directory_that_is_not_private_is_refused_naming_it() {
    let tmp = shared_tmp();
    let runtime = tmp.path().join("run");
    fs::create_dir(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    chown_nobody(&runtime);
    let state = runtime.join("sandbox");
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    chown_nobody(&elsewhere);
    // Control: a private one is used.
    let o = sandbox_env(As::Nobody, tmp.path(), &[("XDG_RUNTIME_DIR", &runtime)]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(env_tmpdir(&out), state.join("tmp"));
    fs::remove_dir_all(&state).unwrap();
    // A symlink, and a directory others may enter: refused, never used.
    std::os::unix::fs::symlink(&elsewhere, &state).unwrap();
    chown_nobody(&state);
    let o = sandbox_env(As::Nobody, tmp.path(), &[("XDG_RUNTIME_DIR", &runtime)]);
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(
        err.contains(&format!(
            "{} as the sandbox's private directory: it is a symlink",
            state.display()
        )),
        "{err}"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    fs::remove_file(&state).unwrap();
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
    chown_nobody(&state);
    let o = sandbox_env(As::Nobody, tmp.path(), &[("XDG_RUNTIME_DIR", &runtime)]);
    let (_, err) = text(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("its mode is 755, not 700"), "{err}");
    assert!(err.lines().count() == 1, "{err}");
    // A job that must make a placeholder cannot record it there either: refused, naming it.
    let ws = tempfile::tempdir_in(tmp.path()).unwrap();
    let st = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(ws.path())
        .status()
        .unwrap();
    assert!(st.success());
    let o = command(As::Nobody, SANDBOX)
        .args([
            "run",
            "--landlock",
            "off",
            "--profile",
            "shell",
            "--",
            "/bin/true",
        ])
        .env("XDG_RUNTIME_DIR", &runtime)
        .current_dir(ws.path())
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&state.display().to_string()) && err.contains("its mode is 755"),
        "{err}"
    );
    assert!(!ws.path().join(".git/commondir").exists());
    // Control: with the directory private again the same job runs.
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    let o = command(As::Nobody, SANDBOX)
        .args([
            "run",
            "--landlock",
            "off",
            "--profile",
            "shell",
            "--",
            "/bin/true",
        ])
        .env("XDG_RUNTIME_DIR", &runtime)
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

/// The name of the lock file older hosts kept for protected path `p` in `/tmp/sandbox-locks`.
fn old_lock_name(p: &Path) -> String {
    use sha2::Digest;
    use std::os::unix::ffi::OsStrExt;
    let digest = sha2::Sha256::digest(p.as_os_str().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn planted_records_and_symlinks_make_no_root_job_remove_a_root_file() {
    // Not under /tmp, which the job's namespace replaces: the symlinks below must lead
    // somewhere inside it too.
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // Root's empty file and directory, in a directory only root may write.
    let victims = tmp.path().join("root-only");
    fs::create_dir(&victims).unwrap();
    let file = victims.join("empty-file");
    let dir = victims.join("empty-dir");
    fs::write(&file, "").unwrap();
    fs::create_dir(&dir).unwrap();
    // A repository uid 65534 may write, in which root runs a job.
    let ws = tmp.path().join("repo");
    fs::create_dir(&ws).unwrap();
    let st = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&ws)
        .status()
        .unwrap();
    assert!(st.success());
    let commondir = ws.join(".git/commondir");
    let hooks = ws.join(".git/hooks");
    let nobody_sh = |script: &str| {
        let o = command(As::Nobody, "/bin/sh")
            .args(["-c", script])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(o.status.success(), "{script}: {:?}", text(&o));
    };
    // Uid 65534 points both protected paths at root's files, and plants, where older hosts
    // read them, records naming those files as placeholders.
    fs::remove_dir_all(&hooks).unwrap();
    nobody_sh(&format!(
        "ln -s {} .git/commondir && ln -s {} .git/hooks",
        file.display(),
        dir.display()
    ));
    let locks = Path::new("/tmp/sandbox-locks");
    if fs::create_dir(locks).is_ok() {
        fs::set_permissions(locks, fs::Permissions::from_mode(0o1777)).unwrap();
    }
    for (p, victim) in [(&commondir, &file), (&hooks, &dir)] {
        let made = locks.join(format!("{}.made", old_lock_name(p)));
        let _ = fs::remove_file(&made);
        nobody_sh(&format!(
            "printf %s '{}' > '{}'",
            victim.display(),
            made.display()
        ));
    }
    let root_job = || {
        command(As::Root, SANDBOX)
            .args([
                "run",
                "--allow-root",
                "--landlock",
                "off",
                "--profile",
                "shell",
            ])
            .args(["--", "/bin/true"])
            .current_dir(&ws)
            .output()
            .unwrap()
    };
    let o = root_job();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(
        file.exists() && dir.exists(),
        "a root job removed a root file"
    );
    // Root's own records, where the new hosts keep them, are out of uid 65534's reach.
    assert!(Path::new("/run/sandbox/placeholders").is_dir());
    let o = command(As::Nobody, "/bin/sh")
        .args(["-c", "echo x > /run/sandbox/placeholders/planted"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    // Control: a record in root's own directory is what lets a job remove a placeholder: one
    // naming the file (as only root could write it) has the next job remove it.
    let m = fs::metadata(&file).unwrap();
    let record = Path::new("/run/sandbox/placeholders").join(format!("{}-{}", m.dev(), m.ino()));
    fs::write(&record, file.as_os_str().as_encoded_bytes()).unwrap();
    let o = root_job();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(
        !file.exists(),
        "the record did not lead to a removal: the test cannot fail"
    );
    assert!(!record.exists());
    assert!(dir.exists());
}

#[test]
fn another_users_exclusive_lock_on_a_placeholder_refuses_the_job_naming_it() {
    for (holder, who) in [(As::Nobody, As::Root), (As::Root, As::Nobody)] {
        let ws = tempfile::tempdir_in("/var/tmp").unwrap();
        fs::set_permissions(ws.path(), fs::Permissions::from_mode(0o777)).unwrap();
        // An empty directory the job protects: what a placeholder is, so the job holds it.
        let empty = ws.path().join("empty");
        fs::create_dir(&empty).unwrap();
        fs::set_permissions(&empty, fs::Permissions::from_mode(0o755)).unwrap();
        let ro = empty.to_str().unwrap();
        let job = || {
            command(who, SANDBOX)
                .args([
                    "run",
                    "--allow-root",
                    "--landlock",
                    "off",
                    "--profile",
                    "shell",
                ])
                .args(["--read-only", ro, "--", "/bin/true"])
                .current_dir(ws.path())
                .output()
                .unwrap()
        };
        let mut lock = command(holder, "flock")
            .args(["-x", "-o", ro, "sleep", "5"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let o = job();
        let (_, err) = text(&o);
        lock.kill().unwrap();
        lock.wait().unwrap();
        assert_eq!(o.status.code(), Some(125), "{holder:?} {who:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--isolation: cannot protect `{ro}`: another process has held it locked exclusively")),
            "{err}"
        );
        // Control: once the lock is gone the same job runs.
        let o = job();
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
        assert!(empty.exists());
    }
}

#[test]
fn a_read_only_run_sends_roots_state_to_the_next_candidate() {
    // `docker run --read-only` as root: `/run` is root's and no other user may write it, but
    // `/run/sandbox` cannot be made. The state goes to the next candidate (here the temporary
    // directory: HOME has no cache directory) and the request runs. In a mount namespace of
    // its own with a read-only tmpfs on `/run`; the control: `mkdir /run/sandbox` fails there.
    let home = tempfile::tempdir().unwrap();
    let script = format!(
        "mount -t tmpfs -o ro,mode=755 tmpfs /run || exit 90; \
         mkdir /run/sandbox 2>/dev/null && exit 91; \
         echo '{{\"argv\":[\"/bin/echo\",\"hi\"],\"profile\":\"minimal\"}}' | {SANDBOX} exec --json"
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("HOME", home.path().join("absent"))
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["exit_code"], 0, "{out}");
    assert_eq!(v["stdout"], "hi\n", "{out}");
    assert!(
        !v["home"].as_str().unwrap_or("/run").starts_with("/run/"),
        "{out}"
    );
}
