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
#include <linux/fsverity.h>
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
    /* The generation and fs-verity: ext4 here keeps metadata checksums (ENOTTY before the
       argument is read) and the kernel has no fs-verity (EOPNOTSUPP before it is read). */
    int w = open("own", O_RDWR);
    struct fsverity_enable_arg va = { .version = 1, .hash_algorithm = 1, .block_size = 4096,
                                      .salt_size = 64, .salt_ptr = 8 };
    TRY("version-bad-fd", ioctl(9999, FS_IOC_SETVERSION, &f));
    TRY("version-null", ioctl(fd, FS_IOC_SETVERSION, NULL));
    TRY("version-o-path", ioctl(p, FS_IOC_SETVERSION, &f));
    TRY("verity-bad-arg", ioctl(fd, FS_IOC_ENABLE_VERITY, (void *)8));
    TRY("verity-bad-salt", ioctl(fd, FS_IOC_ENABLE_VERITY, &va));
    TRY("verity-writable-fd", ioctl(w, FS_IOC_ENABLE_VERITY, &va));
    TRY("verity-pipe", ioctl(pipes[0], FS_IOC_ENABLE_VERITY, &va));
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
        // The last call ran (its answer is the kernel's here: 0, or EPERM on a machine whose
        // root lacks CAP_SYS_RESOURCE; the comparison above is the check, not a fixed value).
        assert!(
            outs[1].lines().any(|l| l.starts_with("none ")),
            "{}",
            outs[1]
        );
    }
}

/// `gen FILE`: sets the generation of FILE to 1000 with `FS_IOC_SETVERSION` and to 1001 with
/// `EXT4_IOC_SETVERSION`, printing each call's errno; `verity FILE`: enables fs-verity on FILE
/// (opened read-only, as the kernel requires), printing the errno; `verity-null FILE`: the
/// same with a NULL argument.
const VERSION_C: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
int main(int argc, char **argv) {
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) { printf("open %d\n", errno); return 1; }
    if (!strcmp(argv[1], "gen")) {
        int v = 1000;
        printf("setversion %d\n", ioctl(fd, FS_IOC_SETVERSION, &v) ? errno : 0);
        v = 1001;
        printf("ext4-setversion %d\n", ioctl(fd, _IOW('f', 4, long), &v) ? errno : 0);
    } else {
        struct fsverity_enable_arg a; memset(&a, 0, sizeof a);
        unsigned char salt[8] = "saltsalt";
        a.version = 1; a.hash_algorithm = FS_VERITY_HASH_ALG_SHA256; a.block_size = 4096;
        a.salt_size = sizeof salt; a.salt_ptr = (unsigned long)salt;
        void *arg = strcmp(argv[1], "verity") ? NULL : &a;
        printf("verity %d\n", ioctl(fd, FS_IOC_ENABLE_VERITY, arg) ? errno : 0);
    }
    return 0;
}
"#;

/// An ext4 image without metadata checksums (where the owner may set a file's generation;
/// with them ext4 answers ENOTTY) and with the verity feature, loop-mounted while it lives.
struct Image {
    dir: tempfile::TempDir,
}

impl Image {
    fn new() -> Image {
        let dir = tempfile::Builder::new()
            .prefix("contained-version")
            .tempdir_in("/var/tmp")
            .unwrap();
        let img = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
        ok(Command::new("truncate").args(["-s", "64M"]).arg(&img));
        ok(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096", "-O", "verity,^metadata_csum"])
            .arg(&img));
        ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt));
        std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Image { dir }
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mnt()).status();
    }
}

/// The generation of `f` (`lsattr -v`).
fn generation(f: &Path) -> String {
    let o = Command::new("lsattr").arg("-vd").arg(f).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A directory in the image that `who` owns.
fn owned_in(image: &Image, who: As, name: &str) -> PathBuf {
    let d = image.mnt().join(name);
    fs::create_dir_all(&d).unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
    }
    d
}

#[test]
fn generation_numbers_and_verity_outside_the_writable_places() {
    let bin = owned_dir(As::Root, "contained-version-bin");
    let progs = [
        compile_c(bin.path(), "version", VERSION_C, false),
        compile_c(bin.path(), "version-static", VERSION_C, true),
    ];
    let image = Image::new();
    for who in BOTH {
        let home = owned_in(&image, who, &format!("home-{who:?}"));
        let ws = owned_in(&image, who, &format!("ws-{who:?}"));
        for prog in &progs {
            let prog_s = prog.display().to_string();
            let kind = if prog_s.ends_with("static") {
                "static"
            } else {
                "dynamic"
            };
            for (how, dir) in [("control", &home), ("contained", &home), ("workspace", &ws)] {
                let label = format!("{who:?} {kind} {how}");
                let f = victim(who, dir, "file");
                let f_s = f.display().to_string();
                let before = generation(&f);
                let script = format!(
                    "{prog_s} gen {f_s}; {prog_s} verity {f_s}; {prog_s} verity-null {f_s}"
                );
                let mut args = vec!["--isolation", "off", "--static-binary", "confine"];
                if how == "control" {
                    args.extend(["--landlock", "off"]);
                }
                args.extend(["--profile", "shell", "--", "bash", "-c", &script]);
                let o = run(who, ws.as_path(), &args);
                assert!(o.status.success(), "{label}: {}", text(&o));
                let out = String::from_utf8_lossy(&o.stdout);
                // This kernel has no fs-verity (CONFIG_FS_VERITY): the kernel's answer,
                // EOPNOTSUPP, with any argument, where the call is made.
                let nosup = libc::EOPNOTSUPP;
                if how == "contained" {
                    let e = libc::EACCES;
                    assert_eq!(
                        out,
                        format!("setversion {e}\next4-setversion {e}\nverity {e}\nverity {e}\n"),
                        "{label}: {}",
                        text(&o)
                    );
                    assert_eq!(generation(&f), before, "{label}: the generation changed");
                    let err = String::from_utf8_lossy(&o.stderr);
                    assert!(
                        err.lines().any(|l| l.contains("refused ioctl")
                            && l.contains(&format!("to allow: --allow-write {f_s}"))),
                        "{label}: {}",
                        text(&o)
                    );
                } else {
                    // Control (filtered tier), and the workspace: the generation changes
                    // (ext4's own command last).
                    assert_eq!(
                        out,
                        format!(
                            "setversion 0\next4-setversion 0\nverity {nosup}\nverity {nosup}\n"
                        ),
                        "{label}: {}",
                        text(&o)
                    );
                    assert_eq!(generation(&f), "1001", "{label}: {}", text(&o));
                    if how == "workspace" && kind == "dynamic" {
                        assert!(o.stderr.is_empty(), "{label}: {}", text(&o));
                    }
                }
                fs::remove_file(&f).unwrap();
            }
        }
    }
}
