//! The contained tier (Landlock and seccomp, no namespaces: `--isolation off`) keeps a file's
//! mode, owner, times and extended attributes outside the writable places, which Landlock
//! has no right for: the supervisor makes those calls itself within the writable places
//! (docs/isolation.md, "Metadata in the contained tier"). Each attack has its control in the
//! filtered tier (`--landlock off` as well), where the change lands; as root and as uid
//! 65534, dynamic and static programs, through `bash -c` in a bare environment.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::contained::{compile_c, owned_dir, run, text};
use common::{command, As, BOTH, SANDBOX};

/// Every metadata call by path and by a read-only descriptor; exits 0 when any of them
/// changed the file (the attack worked), 1 when all were refused.
const METADATA_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
int main(int argc, char **argv) {
    int bad = 0, rc;
#define TRY(name, call) rc = (call); printf(name " %d\n", rc ? errno : 0); bad |= rc == 0;
    TRY("chmod", chmod(argv[1], 04777));
    TRY("fchmodat", fchmodat(AT_FDCWD, argv[1], 04777, 0));
    struct timespec t[2] = {{1, 0}, {1, 0}};
    TRY("utimensat", utimensat(AT_FDCWD, argv[1], t, 0));
    struct timeval tv[2] = {{1, 0}, {1, 0}};
    TRY("utimes", utimes(argv[1], tv));
    TRY("setxattr", setxattr(argv[1], "user.planted", "x", 1, 0));
    TRY("chown", chown(argv[1], getuid(), getgid()));
    int fd = open(argv[1], O_RDONLY);
    TRY("fchmod", fchmod(fd, 04777));
    TRY("fchown", fchown(fd, getuid(), getgid()));
    TRY("futimens", futimens(fd, t));
    TRY("fsetxattr", fsetxattr(fd, "user.planted", "x", 1, 0));
    int p = open(argv[1], O_PATH);
    TRY("fchmodat2-empty", (int)syscall(452, p, "", 04777, AT_EMPTY_PATH));
    return bad ? 0 : 1;
}
"#;

const CALLS: usize = 11;

fn programs(dir: &Path) -> [PathBuf; 2] {
    [
        compile_c(dir, "meta", METADATA_C, false),
        compile_c(dir, "meta-static", METADATA_C, true),
    ]
}

/// A file `who` owns, mode 0600, with an old mtime and no attributes.
fn victim(who: As, dir: &Path, name: &str) -> PathBuf {
    let f = dir.join(name);
    let _ = fs::remove_file(&f);
    fs::write(&f, "# rc\n").unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    }
    fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
    let st = Command::new("touch")
        .args(["-d", "@1000000000"])
        .arg(&f)
        .status()
        .unwrap();
    assert!(st.success());
    f
}

fn unchanged(f: &Path) -> bool {
    let m = fs::metadata(f).unwrap();
    m.permissions().mode() & 0o7777 == 0o600 && m.mtime() == 1_000_000_000
}

#[test]
fn metadata_outside_the_writable_places_cannot_change_in_the_contained_tier() {
    let bin = owned_dir(As::Root, "contained-meta-bin");
    let progs = programs(bin.path());
    for who in BOTH {
        let home = owned_dir(who, "contained-meta-home");
        let ws = owned_dir(who, "contained-meta-ws");
        for prog in &progs {
            let prog_s = prog.display().to_string();
            let mut base = vec!["--isolation", "off", "--profile", "shell"];
            if prog.ends_with("meta-static") {
                base.extend(["--static-binary", "confine"]);
            }
            let v = victim(who, home.path(), ".bashrc");
            let v_s = v.display().to_string();
            let script = format!("{prog_s} {v_s}");
            // Control: the filtered tier (Landlock off too) lets every change land.
            let mut args = base.clone();
            args.extend(["--landlock", "off", "--", "bash", "-c", &script]);
            let o = run(who, ws.path(), &args);
            assert!(o.status.success(), "{who:?} control: {}", text(&o));
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(out.matches(" 0\n").count(), CALLS, "{who:?}: {}", text(&o));
            assert_eq!(
                fs::metadata(&v).unwrap().permissions().mode() & 0o7777,
                0o4777,
                "{who:?} control"
            );
            // The contained tier: every call refused with EACCES, nothing changed, each named
            // with the narrowest change.
            let v = victim(who, home.path(), ".bashrc");
            let mut args = base.clone();
            args.extend(["--", "bash", "-c", &script]);
            let o = run(who, ws.path(), &args);
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                out.matches(&format!(" {}\n", libc::EACCES)).count(),
                CALLS,
                "{who:?} {prog_s}: {}",
                text(&o)
            );
            assert_eq!(o.status.code(), Some(1), "{who:?}: {}", text(&o));
            assert!(unchanged(&v), "{who:?} {prog_s}: changed");
            assert!(
                err.contains("was refused chmod")
                    && err.contains(&format!("to allow: --allow-write {v_s}")),
                "{who:?}: {}",
                text(&o)
            );
            // The change the line names lets it through.
            let mut args = base.clone();
            args.extend(["--allow-write", &v_s, "--", "bash", "-c", &script]);
            let o = run(who, ws.path(), &args);
            assert!(o.status.success(), "{who:?} allowed: {}", text(&o));
            assert!(!unchanged(&v), "{who:?} allowed: unchanged");
        }
    }
}

#[test]
fn a_symlink_or_a_descriptor_does_not_lead_out_of_the_workspace() {
    for who in BOTH {
        let home = owned_dir(who, "contained-link-home");
        let ws = owned_dir(who, "contained-link-ws");
        // A symlink in the workspace, a directory descriptor opened on the outside place
        // and `..` out of the workspace: each leads to the victim.
        let script = "ln -sf \"$V\" link && chmod 4777 link; echo link $?; \
             python3 -c 'import os,sys; d=os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY); \
             os.chmod(os.path.basename(sys.argv[1]), 0o4777, dir_fd=d)' \"$V\"; echo dirfd $?; \
             chmod 4777 \"../$(basename \"$(dirname \"$V\")\")/$(basename \"$V\")\"; echo dots $?";
        for landlock in ["off", "preferred"] {
            let v = victim(who, home.path(), "target");
            let v_s = v.display().to_string();
            let body = format!("V={v_s}; {script}");
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    "off",
                    "--landlock",
                    landlock,
                    "--profile",
                    "shell",
                    "--",
                    "bash",
                    "-c",
                    &body,
                ],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            if landlock == "off" {
                // Control (filtered tier): each path leads out and changes the file.
                assert!(
                    out.contains("link 0") && out.contains("dirfd 0") && out.contains("dots 0"),
                    "{who:?} control: {}",
                    text(&o)
                );
                assert!(!unchanged(&v), "{who:?} control");
            } else {
                assert!(
                    out.contains("link 1") && out.contains("dirfd 1") && out.contains("dots 1"),
                    "{who:?}: {}",
                    text(&o)
                );
                assert!(unchanged(&v), "{who:?}: changed");
            }
        }
    }
}

#[test]
fn inside_the_workspace_metadata_changes_as_before() {
    for who in BOTH {
        let ws = owned_dir(who, "contained-inside-ws");
        let script = "set -e; printf '#!/bin/sh\\necho ran\\n' > s.sh; chmod +x s.sh; ./s.sh; \
             touch -d @5 s.sh; stat -c 'mtime %Y' s.sh; \
             mkdir src; echo a > src/f; chmod 0751 src/f; touch -d @7 src/f; \
             tar cf t.tar src; mkdir out; tar xpf t.tar -C out; stat -c 'tar %a %Y' out/src/f; \
             cp -a src copy; stat -c 'cp %a %Y' copy/f; \
             python3 -c 'import os; os.setxattr(\"copy/f\", \"user.k\", b\"v\"); print(\"xattr\", os.getxattr(\"copy/f\", \"user.k\"))'; \
             git init -q g; cd g; echo hi > a; git add a; \
             git -c user.name=a -c user.email=a@b commit -qm m; git log --format=commit:%s";
        let o = run(
            who,
            ws.path(),
            &[
                "--isolation",
                "off",
                "--profile",
                "shell",
                "--",
                "bash",
                "-c",
                script,
            ],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        for want in [
            "ran",
            "mtime 5",
            "tar 751 7",
            "cp 751 7",
            "xattr b'v'",
            "commit:m",
        ] {
            assert!(out.contains(want), "{who:?} {want}: {}", text(&o));
        }
        // Nothing on stderr when all is well.
        assert!(o.stderr.is_empty(), "{who:?}: {}", text(&o));
    }
}

#[test]
fn exec_json_names_the_refusal_with_the_field_that_allows_it() {
    for who in BOTH {
        let home = owned_dir(who, "contained-json-home");
        let ws = owned_dir(who, "contained-json-ws");
        let v = victim(who, home.path(), "rc");
        let v_s = v.display().to_string();
        let req = serde_json::json!({
            "argv": ["chmod", "4777", v_s],
            "profile": "shell",
            "isolation": "off",
            "allow_root": true,
            "cwd": ws.path(),
        });
        let mut c = command(who, SANDBOX);
        c.args(["exec", "--json"]);
        let o = common::output_with_input(&mut c, req.to_string().as_bytes());
        let r: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{who:?} {e}: {}", text(&o)));
        assert!(unchanged(&v), "{who:?}: changed");
        assert_eq!(r["tier"], "contained", "{who:?}: {r}");
        let entry = r["violations"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["syscall"] == "fchmodat"))
            .unwrap_or_else(|| panic!("{who:?}: {r}"));
        assert_eq!(
            entry["change"],
            format!("\"writable_paths\": [\"{v_s}\"]"),
            "{who:?}: {r}"
        );
    }
}

#[test]
fn a_request_that_changed_its_profile_is_supervised_too() {
    // A request that changes its profile attaches its own filter in the child; it carries the
    // claims, and its listener's supervisor makes them. Root only: uid 65534 cannot take a
    // listener from a child without namespaces (such a request is refused, named).
    let home = owned_dir(As::Root, "contained-custom-home");
    let ws = owned_dir(As::Root, "contained-custom-ws");
    let exec = |landlock: &str, extra: serde_json::Value, target: &Path| {
        let mut req = serde_json::json!({
            "argv": ["chmod", "4777", target],
            "profile": "shell",
            "isolation": "off",
            "landlock": landlock,
            "allow_root": true,
            "cwd": ws.path(),
        });
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        if extra.get("profile_file").is_some() {
            req.as_object_mut().unwrap().remove("profile");
        }
        let mut c = command(As::Root, SANDBOX);
        c.args(["exec", "--json"]);
        let o = common::output_with_input(&mut c, req.to_string().as_bytes());
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        r
    };
    let unguarded = |r: &serde_json::Value| {
        r["warnings"].as_array().unwrap().iter().any(|w| {
            w.as_str()
                .unwrap()
                .contains("metadata outside the writable places is unguarded")
        })
    };
    // A profile file that refuses a loader call (the preload stacks its exact filter on the
    // outer one), and the built-in profile with an extra call allowed.
    let custom = home.path().join("custom.toml");
    fs::write(
        &custom,
        "description = \"shell without statfs\"\n\
         allow = [\"@base\", \"@fd-io\", \"@fs-read\", \"@fs-write\", \"@threads\", \
         \"@process\", \"@exec\"]\n\
         deny = [\"@hardening\", \"statfs\"]\n",
    )
    .unwrap();
    let changed = [
        serde_json::json!({"allow": ["ptrace"]}),
        serde_json::json!({"profile_file": custom}),
    ];
    for extra in changed {
        // Control: the filtered tier lets the change land.
        let v = victim(As::Root, home.path(), "rc");
        let r = exec("off", extra.clone(), &v);
        assert!(!unchanged(&v), "control {extra}: {r}");
        let v = victim(As::Root, home.path(), "rc");
        let r = exec("preferred", extra.clone(), &v);
        assert_eq!(r["tier"], "contained", "{r}");
        assert!(unchanged(&v), "{extra}: {r}");
        assert!(!unguarded(&r), "{extra}: {r}");
        let v_s = v.display().to_string();
        assert_eq!(
            r["violations"][0]["change"],
            format!("\"writable_paths\": [{v_s:?}]"),
            "{extra}: {r}"
        );
    }
}

/// Hostile arguments: each call's errno printed; the emulation must answer as the kernel does.
const HOSTILE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#define TRY(name, call) { long rc = (call); printf(name " %d\n", rc < 0 ? errno : 0); }
int main(void) {
    char *longp = malloc(8192); memset(longp, 'a', 8191); longp[8191] = 0;
    char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(page + 4096, 4096);
    memset(page, 'b', 4096); /* no NUL before the unmapped page */
    char *end = page + 4096 - 2; end[0] = 'f'; end[1] = 0; /* a name ending just before it */
    char name[300]; memset(name, 'u', sizeof name); memcpy(name, "user.", 5); name[299] = 0;
    TRY("null-path", syscall(SYS_chmod, NULL, 0644));
    TRY("long-path", chmod(longp, 0644));
    TRY("unterminated", chmod(page, 0644));
    TRY("at-page-end", chmod(end, 0644));
    TRY("empty", chmod("", 0644));
    TRY("bad-flags", syscall(452, AT_FDCWD, "own", 0644, 0x8000));
    TRY("bad-fd", fchmod(9999, 0644));
    TRY("negative-fd", syscall(SYS_fchmodat, -5, "own", 0644));
    TRY("fd-not-dir", syscall(SYS_fchmodat, 1, "own", 0644));
    TRY("huge-value", setxattr("own", "user.k", "x", 1 << 30, 0));
    TRY("long-name", setxattr("own", name, "x", 1, 0));
    TRY("bad-times", utimensat(AT_FDCWD, "own", (struct timespec *)8, 0));
    TRY("null-times-fdcwd", syscall(SYS_utimensat, AT_FDCWD, NULL, NULL, 0));
    TRY("missing", chmod("no/such/file", 0644));
    TRY("newline", chmod("own\nx", 0644));
    return 0;
}
"#;

#[test]
fn hostile_arguments_get_the_kernels_answers() {
    let bin = owned_dir(As::Root, "contained-hostile-bin");
    let prog = compile_c(bin.path(), "hostile", HOSTILE_C, false);
    let prog_s = prog.display().to_string();
    for who in BOTH {
        let ws = owned_dir(who, "contained-hostile-ws");
        let own = ws.path().join("own");
        fs::write(&own, "x").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
        }
        let mut outs = Vec::new();
        // Control: the kernel's own answers (filtered tier); then the emulation's.
        for landlock in ["off", "preferred"] {
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    "off",
                    "--landlock",
                    landlock,
                    "--profile",
                    "shell",
                    "--",
                    &prog_s,
                ],
            );
            assert!(o.status.success(), "{who:?} {landlock}: {}", text(&o));
            assert!(o.stderr.is_empty(), "{who:?} {landlock}: {}", text(&o));
            outs.push(String::from_utf8_lossy(&o.stdout).into_owned());
        }
        assert_eq!(outs[0], outs[1], "{who:?}: kernel, then emulation");
        // The answers are refusals, not successes (the program changed nothing).
        assert!(
            outs[1].contains(&format!("null-path {}", libc::EFAULT)),
            "{}",
            outs[1]
        );
        assert!(
            outs[1].contains(&format!("long-path {}", libc::ENAMETOOLONG)),
            "{}",
            outs[1]
        );
        assert_eq!(
            fs::metadata(&own).unwrap().permissions().mode() & 0o7777,
            0o644,
            "{who:?}"
        );
    }
}

#[test]
fn without_fchmodat2_the_supervisor_changes_modes_through_the_descriptors_magic_link() {
    // Docker 20.10's and podman 4.3's default profiles do not list `fchmodat2` (Linux 6.6),
    // and runc answers it with ENOSYS: every chmod the supervisor made for the job failed, and
    // with it `git init`. Here the host itself runs under a filter that answers `fchmodat2`
    // with ENOSYS (the preload, as a container's profile would be): chmod, `git init` and a
    // tar extraction work, and a chmod outside the writable places is still refused.
    let (_lib_dir, lib) = common::extracted_preload();
    for who in BOTH {
        let ws = owned_dir(who, "contained-no-fchmodat2");
        let script = "echo x > f; chmod 0751 f; stat -c 'mode %a' f; \
             python3 -c 'import os, ctypes; fd = os.open(\"f\", os.O_PATH); \
             print(\"fchmodat2\", ctypes.CDLL(None, use_errno=True).syscall(452, fd, b\"\", 0o700, 0x1000), ctypes.get_errno())'; \
             git init -q g && echo git-init-ok; mkdir src; echo a > src/a; chmod 0700 src/a; \
             tar cf t.tar src; mkdir out; tar xpf t.tar -C out; stat -c 'tar %a' out/src/a; \
             chmod 0777 /etc/hostname || echo refused-outside";
        let mut host = command(who, SANDBOX);
        host.args([
            "run",
            "--allow-root",
            "--isolation",
            "off",
            "--profile",
            "shell",
        ])
        .args(["--", "bash", "-c", script]);
        let o = common::under_host_filter(&mut host, &lib, "fchmodat2", "errno:ENOSYS")
            .current_dir(ws.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        // Control: the filter is in place (the job's own fchmodat2 gets ENOSYS).
        assert!(out.contains("fchmodat2 -1 38"), "{who:?}: {}", text(&o));
        for want in ["mode 751", "git-init-ok", "tar 700", "refused-outside"] {
            assert!(out.contains(want), "{who:?} {want}: {}", text(&o));
        }
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("/etc/hostname lies outside"),
            "{who:?}: {}",
            text(&o)
        );
    }
}
