//! A file in the workspace that is another name (a hard link) of a file elsewhere is the same
//! inode: Landlock and the view decide by path, so before the host made a job's opens that may
//! write, a write through the workspace's name reached the other project (docs/isolation.md,
//! "Hard links"). Each attack runs in the isolated tier (the default) and the contained one
//! (`--isolation off`), as root and as uid 65534, dynamic and static programs, through
//! `bash -c` in a bare environment; its control is the filtered tier (`--landlock off` too),
//! where the write lands.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::contained::{compile_c, owned_dir, run, text};
use common::{As, BOTH};

/// Every way to change a file through a name: opens that write or truncate (`openat`, the
/// old `open`, `creat`, through a directory descriptor), `truncate`, and metadata through a
/// read-only descriptor and by path. Exits 0 when any of them succeeded.
const WRITES_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    int bad = 0, fd;
#define OPEN(name, call) fd = (call); printf(name " %d\n", fd < 0 ? errno : 0); \
    if (fd >= 0) { bad = 1; if (write(fd, "evil\n", 5) < 0) perror("write"); close(fd); }
#define TRY(name, call) fd = (call); printf(name " %d\n", fd ? errno : 0); bad |= fd == 0;
    OPEN("trunc", open(argv[1], O_WRONLY | O_TRUNC));
    OPEN("rdwr", open(argv[1], O_RDWR));
    OPEN("append", open(argv[1], O_WRONLY | O_APPEND));
    OPEN("creat", creat(argv[1], 0644));
    OPEN("legacy", (int)syscall(SYS_open, argv[1], O_WRONLY | O_APPEND));
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    OPEN("dirfd", openat(dir, argv[1], O_WRONLY | O_APPEND));
    TRY("truncate", truncate(argv[1], 1));
    int ro = open(argv[1], O_RDONLY);
    TRY("fchmod", fchmod(ro, 0777));
    TRY("utimensat", utimensat(AT_FDCWD, argv[1], NULL, 0));
    return bad ? 0 : 1;
}
"#;

const WRITES: usize = 9;

/// Two threads: one swaps the names `a` (a file of the workspace's own) and `h` (a link to a
/// file elsewhere) over and over (`RENAME_EXCHANGE`), the other appends to `a` at least 3,000
/// times and until it met the linked file 20 times (opened through it, or refused). A check of
/// the name followed by the kernel's own open would let some appends reach the linked file.
const RACE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
static volatile int stop, swaps;
static void *swap(void *x) {
    unsigned r = 1;
    while (!stop) {
        if (syscall(SYS_renameat2, AT_FDCWD, "a", AT_FDCWD, "h", 2) == 0) swaps++;
        /* A pause of random length: without it the two threads can fall into step, the
           opens always finding the same name. */
        r = r * 1103515245 + 12345;
        for (unsigned k = (r >> 16) % 256; k; k--) __asm__ volatile("" ::: "memory");
    }
    return x;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, swap, NULL);
    int opened = 0, linked = 0, refused = 0;
    while (swaps < 10) usleep(100);
    /* Until the swapped name was met often enough (opened through, or refused), or long. */
    for (int i = 0; (i < 3000 || linked + refused < 20) && i < 300000; i++) {
        int fd = open("a", O_WRONLY | O_APPEND);
        if (fd < 0) { if (errno == EACCES) refused++; continue; }
        opened++;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_nlink > 1) linked++;
        if (write(fd, "X", 1) < 0) perror("write");
        close(fd);
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("opened %d linked %d refused %d\n", opened, linked, refused);
    return 0;
}
"#;

/// The tiers a case runs in: (its name, the arguments that ask for it).
const TIERS: [(&str, &[&str]); 2] = [
    ("isolated", &["--profile", "shell"]),
    ("contained", &["--profile", "shell", "--isolation", "off"]),
];

/// The control: the filtered tier, whose writes are not the host's.
const FILTERED: &[&str] = &[
    "--profile",
    "shell",
    "--isolation",
    "off",
    "--landlock",
    "off",
];

/// A file `who` owns outside the workspace, with the content `original`, and its second name
/// `name` in the workspace.
fn linked(who: As, outside: &Path, ws: &Path, name: &str) -> PathBuf {
    let f = outside.join(format!("{name}.orig"));
    let _ = fs::remove_file(&f);
    let _ = fs::remove_file(ws.join(name));
    fs::write(&f, "original\n").unwrap();
    if who == As::Nobody {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    }
    fs::hard_link(&f, ws.join(name)).unwrap();
    f
}

fn untouched(f: &Path) -> bool {
    let m = fs::metadata(f).unwrap();
    fs::read_to_string(f).unwrap() == "original\n" && m.mode() & 0o7777 != 0o777
}

/// `sandbox run` with the arguments of `parts` one after another.
fn run_parts(who: As, cwd: &Path, parts: &[&[&str]]) -> std::process::Output {
    run(who, cwd, &parts.concat())
}

#[test]
fn no_write_truncation_or_metadata_change_reaches_a_linked_file() {
    let bin = owned_dir(As::Root, "links-bin");
    let progs = [
        compile_c(bin.path(), "writes", WRITES_C, false),
        compile_c(bin.path(), "writes-static", WRITES_C, true),
    ];
    for who in BOTH {
        let outside = owned_dir(who, "links-out");
        let ws = owned_dir(who, "links-ws");
        for prog in &progs {
            let mut statics: Vec<&str> = Vec::new();
            if prog.ends_with("writes-static") {
                statics.extend(["--static-binary", "confine"]);
            }
            let script = format!("{} victim", prog.display());
            let cmd = ["--", "bash", "-c", &script];
            // Control: in the filtered tier every change lands on the other name.
            let f = linked(who, outside.path(), ws.path(), "victim");
            let o = run_parts(who, ws.path(), &[FILTERED, &statics, &cmd]);
            assert_eq!(o.status.code(), Some(0), "{who:?} control: {}", text(&o));
            assert!(!untouched(&f), "{who:?} control: the write did not land");
            for (tier, args) in TIERS {
                let f = linked(who, outside.path(), ws.path(), "victim");
                let o = run_parts(who, ws.path(), &[args, &statics, &cmd]);
                let out = String::from_utf8_lossy(&o.stdout);
                assert_eq!(
                    out.matches(&format!(" {}\n", libc::EACCES)).count(),
                    WRITES,
                    "{who:?} {tier} {}: {}",
                    prog.display(),
                    text(&o)
                );
                assert_eq!(o.status.code(), Some(1), "{who:?} {tier}: {}", text(&o));
                assert!(untouched(&f), "{who:?} {tier}: the linked file changed");
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("victim has other names (hard links)")
                        && err.contains("UV_LINK_MODE=copy"),
                    "{who:?} {tier}: not named: {}",
                    text(&o)
                );
            }
        }
    }
}

#[test]
fn a_name_swapped_during_the_open_does_not_carry_it_to_a_linked_file() {
    let bin = owned_dir(As::Root, "links-race-bin");
    let prog = compile_c(bin.path(), "race", RACE_C, false);
    let script = prog.display().to_string();
    for who in BOTH {
        let outside = owned_dir(who, "links-race-out");
        let ws = owned_dir(who, "links-race-ws");
        let own = |ws: &Path| {
            let a = ws.join("a");
            let _ = fs::remove_file(&a);
            fs::write(&a, "").unwrap();
            if who == As::Nobody {
                std::os::unix::fs::chown(&a, Some(65534), Some(65534)).unwrap();
            }
        };
        // Control: in the filtered tier some appends reach the linked file.
        own(ws.path());
        let f = linked(who, outside.path(), ws.path(), "h");
        let o = run_parts(who, ws.path(), &[FILTERED, &["--", "bash", "-c", &script]]);
        assert!(o.status.success(), "{who:?} control: {}", text(&o));
        assert!(
            fs::read_to_string(&f).unwrap().contains('X'),
            "{who:?} control: no append reached the linked file: {}",
            text(&o)
        );
        for (tier, args) in TIERS {
            own(ws.path());
            let f = linked(who, outside.path(), ws.path(), "h");
            let o = run_parts(who, ws.path(), &[args, &["--", "bash", "-c", &script]]);
            assert!(o.status.success(), "{who:?} {tier}: {}", text(&o));
            assert_eq!(
                fs::read_to_string(&f).unwrap(),
                "original\n",
                "{who:?} {tier}: an append reached the linked file: {}",
                text(&o)
            );
            // Some appends went to the workspace's own file, as they should, none through the
            // linked one, and the swapped name was met (and refused) during the run.
            let out = String::from_utf8_lossy(&o.stdout).to_string();
            let field = |name: &str| -> usize {
                out.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            };
            assert!(field("opened") > 0, "{who:?} {tier}: {}", text(&o));
            assert_eq!(field("linked"), 0, "{who:?} {tier}: {}", text(&o));
            assert!(field("refused") > 0, "{who:?} {tier}: {}", text(&o));
        }
    }
}

/// What must keep working where the host makes the opens: new files with the thread's mask,
/// appends, truncation, `O_CREAT` on an existing file, a dangling symlink's target made,
/// `O_EXCL` on an existing name, a directory, FIFOs, `/dev/null`, `/dev/stderr`, `/dev/tty`
/// without a terminal, a link made during the job, and git.
const ORDINARY: &str = r#"set -u
umask 077; echo one > new; stat -c 'mode %a' new
umask 022; echo two > new2; stat -c 'mode2 %a' new2
echo three >> new; cat new | tr '\n' ' '; echo
: > new2; stat -c 'size %s' new2
python3 -c 'import os; f=os.open("new", os.O_WRONLY|os.O_CREAT); os.write(f, b"ONE"); print("creat-existing", open("new").read().split()[0])'
ln -s made dangling; echo target > dangling; cat made
python3 -c '
import os, errno
try: os.open("new", os.O_WRONLY|os.O_CREAT|os.O_EXCL)
except OSError as e: print("excl", errno.errorcode[e.errno])
os.mkdir("d")
try: os.open("d", os.O_WRONLY)
except OSError as e: print("dir", errno.errorcode[e.errno])
try: os.open("/dev/tty", os.O_RDWR)
except OSError as e: print("tty", errno.errorcode[e.errno])
f = os.open("new2", os.O_WRONLY | os.O_NOFOLLOW | os.O_APPEND); os.write(f, b"nofollow"); print("nofollow", open("new2").read())
os.symlink("new2", "sym")
try: os.open("sym", os.O_WRONLY | os.O_NOFOLLOW)
except OSError as e: print("symlink", errno.errorcode[e.errno])
'
mkfifo p; (sleep 0.2; cat p) & echo through-fifo > p; wait
mkdir sub && cd sub && echo up > ../up && cd .. && cat up
T=${TMPDIR:-/tmp}; ln -s "$T/abs-target" abs && echo absolute > abs && cat "$T/abs-target"
echo gone > /dev/null && echo devnull
echo to-stderr > /dev/stderr
echo mine > linked-here; ln linked-here second; echo more >> second; cat linked-here | tr '\n' ' '; echo
git init -q repo && cd repo && git config user.email a@b && git config user.name a && echo x > f && git add f && git commit -qm one && git log --oneline | wc -l
"#;

#[test]
fn ordinary_writes_in_the_workspace_work_as_before() {
    for who in BOTH {
        for (tier, args) in TIERS {
            let ws = owned_dir(who, "links-ordinary-ws");
            let o = run_parts(who, ws.path(), &[args, &["--", "bash", "-c", ORDINARY]]);
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            for want in [
                "mode 600\n",
                "mode2 644\n",
                "one three \n",
                "size 0\n",
                "creat-existing ONE\n",
                "target\n",
                "excl EEXIST\n",
                "dir EISDIR\n",
                "tty ENXIO\n",
                "nofollow nofollow\n",
                "symlink ELOOP\n",
                "through-fifo\n",
                "devnull\n",
                "mine more \n",
                "up\n",
                "absolute\n",
                "1\n",
            ] {
                assert!(
                    out.contains(want),
                    "{who:?} {tier}: no {want:?}: {}",
                    text(&o)
                );
            }
            assert!(o.status.success(), "{who:?} {tier}: {}", text(&o));
            assert_eq!(err, "to-stderr\n", "{who:?} {tier}: {}", text(&o));
        }
    }
}

/// A local repository cloned before the job (`git clone` of a path links `.git/objects`):
/// a job that rewrites a loose object of its clone would make the source check out its
/// content.
#[test]
fn a_local_clones_objects_stay_the_sources() {
    for who in BOTH {
        let src = owned_dir(who, "links-git-src");
        let ws = owned_dir(who, "links-git-ws");
        let git = |cwd: &Path, args: &[&str]| {
            let o = common::command(who, "git")
                .args(args)
                .current_dir(cwd)
                .output()
                .unwrap();
            assert!(o.status.success(), "git {args:?}: {}", text(&o));
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        git(src.path(), &["init", "-q", "."]);
        git(src.path(), &["config", "user.email", "a@b"]);
        git(src.path(), &["config", "user.name", "a"]);
        fs::write(src.path().join("f"), "source\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(src.path().join("f"), Some(65534), Some(65534)).unwrap();
        }
        git(src.path(), &["add", "f"]);
        git(src.path(), &["commit", "-qm", "one"]);
        let src_s = src.path().display().to_string();
        git(ws.path(), &["clone", "-q", &src_s, "clone"]);
        let blob = git(src.path(), &["rev-parse", "HEAD:f"]);
        let object = format!("clone/.git/objects/{}/{}", &blob[..2], &blob[2..]);
        assert!(
            fs::metadata(ws.path().join(&object)).unwrap().nlink() > 1,
            "the clone's object is not linked"
        );
        // The job rewrites the object with other content (as root it may write a 0444 file;
        // otherwise it makes it writable first).
        let script = format!(
            "chmod u+w {object}; python3 -c 'import sys, zlib; \
             open(sys.argv[1], \"wb\").write(zlib.compress(b\"blob 5\\0evil\\n\"))' {object}; \
             echo rc $?"
        );
        for (tier, args) in TIERS {
            let o = run_parts(who, ws.path(), &[args, &["--", "bash", "-c", &script]]);
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("rc 1"),
                "{who:?} {tier}: {}",
                text(&o)
            );
            assert_eq!(git(src.path(), &["cat-file", "-p", &blob]), "source");
        }
        // Control: in the filtered tier the source's object changes.
        let o = run_parts(who, ws.path(), &[FILTERED, &["--", "bash", "-c", &script]]);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("rc 0"),
            "{}",
            text(&o)
        );
        let shown = common::command(who, "git")
            .args(["cat-file", "-p", &blob])
            .current_dir(src.path())
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&shown.stdout), "evil\n", "control");
    }
}

/// uv (from PyPI) and pnpm (from npm), installed for the test in `target/`, make the links
/// the tools make by default: a venv whose packages are linked from uv's cache, a
/// `node_modules` linked from pnpm's store (both outside the workspace). A job's write to
/// an installed file is refused and named; the jobs' environment makes the tools copy.
#[test]
fn uv_venvs_and_pnpm_trees_linked_from_their_stores_are_not_written_through() {
    let tools = tools();
    let root = owned_dir(As::Root, "links-tools");
    let ws = root.path().join("ws");
    fs::create_dir(&ws).unwrap();
    let cache = root.path().join("uv-cache");
    let store = root.path().join("pnpm-store");
    let ok = |c: &mut Command, what: &str| {
        let o = c.output().unwrap();
        assert!(o.status.success(), "{what}: {}", text(&o));
    };
    ok(
        Command::new(tools.join("venv/bin/uv"))
            .args(["venv", "-q", "--cache-dir"])
            .arg(&cache)
            .arg(ws.join(".venv"))
            .current_dir(&ws),
        "uv venv",
    );
    ok(
        Command::new(tools.join("venv/bin/uv"))
            .args(["pip", "install", "-q", "--cache-dir"])
            .arg(&cache)
            .arg("six==1.16.0")
            .env("VIRTUAL_ENV", ws.join(".venv"))
            .current_dir(&ws),
        "uv pip install",
    );
    fs::write(ws.join("package.json"), r#"{"name":"t","version":"1.0.0"}"#).unwrap();
    ok(
        Command::new(tools.join("node_modules/.bin/pnpm"))
            .args(["add", "--silent", "is-number@7.0.0", "--store-dir"])
            .arg(&store)
            .current_dir(&ws),
        "pnpm add",
    );
    let six = fs::read_dir(ws.join(".venv/lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages/six.py");
    let number = fs::canonicalize(ws.join("node_modules/is-number/index.js")).unwrap();
    for f in [&six, &number] {
        assert!(
            fs::metadata(f).unwrap().nlink() > 1,
            "{} is not linked",
            f.display()
        );
    }
    let before = (fs::read(&six).unwrap(), fs::read(&number).unwrap());
    let script = format!(
        "echo 'import os' >> {}; echo rc $?; echo 'evil()' >> {}; echo rc $?; \
         echo \"$UV_LINK_MODE $npm_config_package_import_method\"",
        six.display(),
        number.display()
    );
    for (tier, args) in TIERS {
        let o = run_parts(As::Root, &ws, &[args, &["--", "bash", "-c", &script]]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.matches("rc 1").count(), 2, "{tier}: {}", text(&o));
        assert!(out.contains("copy copy"), "{tier}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("six.py has other names"),
            "{tier}: {}",
            text(&o)
        );
        assert_eq!(
            before,
            (fs::read(&six).unwrap(), fs::read(&number).unwrap())
        );
    }
    // Control: the filtered tier writes into uv's cache and pnpm's store.
    let o = run_parts(As::Root, &ws, &[FILTERED, &["--", "bash", "-c", &script]]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).matches("rc 0").count(),
        2,
        "{}",
        text(&o)
    );
    let cached = walk(&cache).into_iter().chain(walk(&store)).any(|p| {
        fs::read_to_string(&p).is_ok_and(|t| t.ends_with("import os\n") || t.ends_with("evil()\n"))
    });
    assert!(cached, "control: the stores are unchanged");
}

/// uv and pnpm for the test, installed once into `target/link-tools` from the registries.
fn tools() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("link-tools");
    if dir.join("venv/bin/uv").exists() && dir.join("node_modules/.bin/pnpm").exists() {
        return dir;
    }
    fs::create_dir_all(&dir).unwrap();
    let ok = |c: &mut Command, what: &str| {
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{what} (the test installs it from its registry): {}",
            text(&o)
        );
    };
    ok(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(dir.join("venv")),
        "python3 -m venv",
    );
    ok(
        Command::new(dir.join("venv/bin/pip")).args(["install", "-q", "uv"]),
        "pip install uv",
    );
    ok(
        Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "pnpm@9"])
            .current_dir(&dir),
        "npm install pnpm",
    );
    dir
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&p)),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}

/// A session's commands are served by the same supervisor: a linked file made before the
/// session is refused in each tier; a link made by an earlier command of the session is the
/// session's own and may be written; a background process left by a command still has its
/// opens made.
#[test]
fn a_sessions_commands_do_not_write_through_a_linked_file() {
    for who in BOTH {
        for (tier, args) in TIERS {
            let outside = owned_dir(who, "links-session-out");
            let ws = owned_dir(who, "links-session-ws");
            let f = linked(who, outside.path(), ws.path(), "victim");
            let start = common::command(who, common::SANDBOX)
                .args(["session", "start", "--allow-root"])
                .args(args)
                .current_dir(ws.path())
                .output()
                .unwrap();
            assert!(start.status.success(), "{who:?} {tier}: {}", text(&start));
            let id = String::from_utf8_lossy(&start.stdout).trim().to_string();
            let cmd = |script: &str| {
                common::command(who, common::SANDBOX)
                    .args(["run", "--session", &id, "--", "bash", "-c", script])
                    .current_dir(ws.path())
                    .output()
                    .unwrap()
            };
            let o = cmd("echo evil >> victim; echo rc $?");
            assert!(
                String::from_utf8_lossy(&o.stdout).contains("rc 1"),
                "{who:?} {tier}: {}",
                text(&o)
            );
            assert!(
                String::from_utf8_lossy(&o.stderr).contains("victim has other names"),
                "{who:?} {tier}: {}",
                text(&o)
            );
            assert!(untouched(&f), "{who:?} {tier}");
            let o = cmd("echo a > own && ln own own2");
            assert!(o.status.success(), "{who:?} {tier}: {}", text(&o));
            let o = cmd("echo b >> own2 && cat own");
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                "a\nb\n",
                "{who:?} {tier}: {}",
                text(&o)
            );
            // A process the command leaves behind opens after the command ended.
            let o = cmd("(sleep 0.5; echo late > late) >/dev/null 2>&1 &");
            assert!(o.status.success(), "{who:?} {tier}: {}", text(&o));
            let o = cmd("sleep 1.5; cat late");
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                "late\n",
                "{who:?} {tier}: {}",
                text(&o)
            );
            let end = common::command(who, common::SANDBOX)
                .args(["session", "end", &id])
                .output()
                .unwrap();
            assert!(end.status.success(), "{who:?} {tier}: {}", text(&end));
        }
    }
}

/// Docker's default seccomp profile refuses `pidfd_getfd` without `CAP_SYS_PTRACE`; the host's
/// opens take no descriptor of the job, so they are made there too. Here the host itself runs
/// under a filter that refuses `pidfd_getfd` with EPERM (the preload, as the container's
/// profile would be).
#[test]
fn without_pidfd_getfd_the_host_still_makes_the_opens() {
    let (_lib_dir, lib) = common::extracted_preload();
    for who in BOTH {
        let outside = owned_dir(who, "links-nogetfd-out");
        let ws = owned_dir(who, "links-nogetfd-ws");
        let f = linked(who, outside.path(), ws.path(), "victim");
        let mut host = common::command(who, common::SANDBOX);
        host.args([
            "run",
            "--allow-root",
            "--isolation",
            "off",
            "--profile",
            "shell",
        ])
        .args([
            "--",
            "bash",
            "-c",
            "echo evil >> victim; echo rc $?; echo mine > own && cat own",
        ]);
        let o = common::under_host_filter(&mut host, &lib, "pidfd_getfd", "errno:EPERM")
            .current_dir(ws.path())
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        // Control: the host may not take descriptors here (the run says so).
        assert!(
            err.contains("may not take the job's descriptors"),
            "{who:?}: {}",
            text(&o)
        );
        assert!(out.contains("rc 1\nmine\n"), "{who:?}: {}", text(&o));
        assert!(
            err.contains("victim has other names"),
            "{who:?}: {}",
            text(&o)
        );
        assert!(untouched(&f), "{who:?}");
    }
}
