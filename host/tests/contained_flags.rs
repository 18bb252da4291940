//! A file's flags (`chattr`: `ioctl(FS_IOC_SETFLAGS)`, `ioctl(FS_IOC_FSSETXATTR)`) outside
//! the writable places in the contained tier (`--isolation off`): Landlock's `IOCTL_DEV` right
//! covers devices only, so the supervisor sets them within the writable places and refuses
//! them elsewhere (docs/isolation.md, "Metadata in the contained tier"). Controls in the
//! filtered tier (`--landlock off` as well), where the flag lands. Root sets append-only and
//! immutable (`CAP_LINUX_IMMUTABLE`), uid 65534 the flags an owner may set (no-dump); real
//! `chattr`, and a static program making both ioctls. `/var/tmp` is ext4 here.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::contained::{compile_c, owned_dir, run, text};
use common::{As, BOTH};

/// Sets `FLAG` on argv[1] with `FS_IOC_SETFLAGS` and the matching `FS_XFLAG` on argv[2]
/// with `FS_IOC_FSSETXATTR`, printing each call's errno.
const FLAGS_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
int main(int argc, char **argv) {
    int flag = atoi(argv[3]), xflag = atoi(argv[4]);
    int fd = open(argv[1], O_RDONLY), f = 0;
    ioctl(fd, FS_IOC_GETFLAGS, &f);
    f |= flag;
    printf("setflags %d\n", ioctl(fd, FS_IOC_SETFLAGS, &f) ? errno : 0);
    struct fsxattr x;
    int gd = open(argv[2], O_RDONLY);
    ioctl(gd, FS_IOC_FSGETXATTR, &x);
    x.fsx_xflags |= xflag;
    printf("fssetxattr %d\n", ioctl(gd, FS_IOC_FSSETXATTR, &x) ? errno : 0);
    return 0;
}
"#;

/// The flags `lsattr` shows for `f` (its first word).
fn attrs(f: &Path) -> String {
    let o = Command::new("lsattr").arg("-d").arg(f).output().unwrap();
    assert!(o.status.success(), "lsattr {}", f.display());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Clears what a test may have set (an immutable file cannot be removed).
fn clear(f: &Path) {
    let _ = Command::new("chattr")
        .args(["-a", "-i", "-d"])
        .arg(f)
        .status();
}

/// A fresh file `who` owns in `dir`.
fn victim(who: As, dir: &Path, name: &str) -> PathBuf {
    let f = dir.join(name);
    if f.exists() {
        clear(&f);
        fs::remove_file(&f).unwrap();
    }
    fs::write(&f, "x\n").unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    }
    f
}

/// The flag `who` may set, as `chattr` writes it, `lsattr` shows it, and the two ioctls'
/// numbers (`FS_APPEND_FL` / `FS_XFLAG_APPEND`, `FS_NODUMP_FL` / `FS_XFLAG_NODUMP`).
fn flag(who: As) -> (&'static str, char, &'static str, &'static str) {
    match who {
        As::Root => ("+a", 'a', "32", "16"),
        As::Nobody => ("+d", 'd', "64", "128"),
    }
}

fn program(dir: &Path) -> PathBuf {
    compile_c(dir, "flags-static", FLAGS_C, true)
}

#[test]
fn file_flags_outside_the_writable_places_cannot_change_in_the_contained_tier() {
    let bin = owned_dir(As::Root, "contained-flags-bin");
    let prog = program(bin.path()).display().to_string();
    for who in BOTH {
        let home = owned_dir(who, "contained-flags-home");
        let ws = owned_dir(who, "contained-flags-ws");
        let (plus, shown, fl, xfl) = flag(who);
        for landlock in ["off", "preferred"] {
            let a = victim(who, home.path(), "rc");
            let b = victim(who, home.path(), "profile");
            let c = victim(who, home.path(), "hist");
            let (a_s, b_s, c_s) = (
                a.display().to_string(),
                b.display().to_string(),
                c.display().to_string(),
            );
            let script =
                format!("chattr {plus} {a_s}; echo chattr $?; {prog} {b_s} {c_s} {fl} {xfl}");
            let o = run(
                who,
                ws.path(),
                &[
                    "--isolation",
                    "off",
                    "--landlock",
                    landlock,
                    "--static-binary",
                    "confine",
                    "--profile",
                    "shell",
                    "--",
                    "bash",
                    "-c",
                    &script,
                ],
            );
            let out = String::from_utf8_lossy(&o.stdout);
            let landed: Vec<bool> = [&a, &b, &c]
                .iter()
                .map(|f| attrs(f).contains(shown))
                .collect();
            if landlock == "off" {
                // Control (filtered tier): each flag lands.
                assert_eq!(landed, [true; 3], "{who:?} control: {}", text(&o));
                assert!(
                    out.contains("chattr 0") && out.contains("setflags 0\nfssetxattr 0"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert_eq!(landed, [false; 3], "{who:?}: {}", text(&o));
                let e = libc::EACCES;
                assert!(
                    out.contains("chattr 1")
                        && out.contains(&format!("setflags {e}\nfssetxattr {e}")),
                    "{who:?}: {}",
                    text(&o)
                );
                let err = String::from_utf8_lossy(&o.stderr);
                for f in [&a_s, &b_s, &c_s] {
                    assert!(
                        err.contains(&format!("to allow: --allow-write {f}")),
                        "{who:?} {f}: {}",
                        text(&o)
                    );
                }
            }
            for f in [&a, &b, &c] {
                clear(f);
            }
        }
        // In the workspace the flags change as before (as root, immutable too).
        let own = victim(who, ws.path(), "own");
        let plus = if who == As::Root { "+ai" } else { plus };
        let o = run(
            who,
            ws.path(),
            &[
                "--isolation",
                "off",
                "--profile",
                "shell",
                "--",
                "chattr",
                plus,
                "own",
            ],
        );
        assert!(o.status.success(), "{who:?} own: {}", text(&o));
        assert!(o.stderr.is_empty(), "{who:?} own: {}", text(&o));
        assert!(attrs(&own).contains(shown), "{who:?} own: {}", text(&o));
        if who == As::Root {
            assert!(attrs(&own).contains('i'), "{}", text(&o));
        }
        clear(&own);
    }
}

#[test]
fn root_cannot_make_a_file_outside_immutable() {
    // The case `CAP_LINUX_IMMUTABLE` makes matter: an immutable file outside cannot even be
    // removed by its owner without the capability.
    let home = owned_dir(As::Root, "contained-flags-imm-home");
    let ws = owned_dir(As::Root, "contained-flags-imm-ws");
    let f = victim(As::Root, home.path(), "config");
    let f_s = f.display().to_string();
    for (landlock, lands) in [("off", true), ("preferred", false)] {
        let o = run(
            As::Root,
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
                &format!("chattr +i {f_s}"),
            ],
        );
        assert_eq!(attrs(&f).contains('i'), lands, "{landlock}: {}", text(&o));
        clear(&f);
    }
}

/// Hostile `ioctl` arguments on the job's own file, each call's errno printed.
const HOSTILE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#define TRY(name, call) { int rc = (call); printf(name " %d\n", rc < 0 ? errno : 0); }
int main(void) {
    int f = 0, fd = open("own", O_RDONLY), p = open("own", O_PATH), pipes[2];
    pipe(pipes);
    struct fsxattr x = {0};
    TRY("bad-fd", ioctl(9999, FS_IOC_SETFLAGS, &f));
    TRY("negative-fd", ioctl(-1, FS_IOC_SETFLAGS, &f));
    TRY("null-arg", ioctl(fd, FS_IOC_SETFLAGS, NULL));
    TRY("bad-arg", ioctl(fd, FS_IOC_FSSETXATTR, (void *)8));
    TRY("o-path", ioctl(p, FS_IOC_SETFLAGS, &f));
    TRY("pipe", ioctl(pipes[0], FS_IOC_SETFLAGS, &f));
    f = 0x7fffffff;
    TRY("every-flag", ioctl(fd, FS_IOC_SETFLAGS, &f));
    x.fsx_xflags = 0xffffffff;
    TRY("every-xflag", ioctl(fd, FS_IOC_FSSETXATTR, &x));
    f = 0;
    TRY("none", ioctl(fd, FS_IOC_SETFLAGS, &f));
    return 0;
}
"#;

#[test]
fn hostile_ioctl_arguments_get_the_kernels_answers() {
    let bin = owned_dir(As::Root, "contained-flags-hostile");
    let prog = compile_c(bin.path(), "hostile", HOSTILE_C, false);
    let prog_s = prog.display().to_string();
    for who in BOTH {
        let ws = owned_dir(who, "contained-flags-hostile-ws");
        let own = victim(who, ws.path(), "own");
        // Control: the kernel's answers (filtered tier); then the host's.
        let outs: Vec<String> = ["off", "preferred"]
            .iter()
            .map(|landlock| {
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
                clear(&own);
                String::from_utf8_lossy(&o.stdout).into_owned()
            })
            .collect();
        assert_eq!(outs[0], outs[1], "{who:?}: kernel, then the host");
        assert!(outs[1].contains("none 0"), "{}", outs[1]);
    }
}
