//! Terminals in the contained tier (Landlock and seccomp, no namespaces: `--isolation off`):
//! the user's other terminals (`/dev/pts/N`) cannot be opened; the job's own terminal (held as
//! a descriptor) and the terminals it creates through `/dev/ptmx` (`openpty`, `script`) work
//! (docs/isolation.md, "Terminals in the contained tier"). Controls in the filtered tier
//! (`--landlock off` as well). As root and as uid 65534, in a bare environment.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Output, Stdio};

mod common;

use common::contained::{owned_dir, text};
use common::{command, As, BOTH, SANDBOX};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workspace(who: As) -> tempfile::TempDir {
    owned_dir(who, "contained-tty-ws")
}

#[test]
fn another_terminal_of_the_user_cannot_be_opened() {
    // A terminal of the user's, held open outside, with a line typed into it and not read.
    let holder = r#"
import os, pty, time
m, s = pty.openpty()
os.write(m, b"secret-typed\n")
print(os.ttyname(s), flush=True)
time.sleep(60)
"#;
    for who in BOTH {
        let ws = workspace(who);
        for landlock in ["off", "preferred"] {
            let mut held = Killed(
                command(who, "python3")
                    .args(["-c", holder])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            let mut out = held.0.stdout.take().unwrap();
            let mut name = String::new();
            let mut b = [0u8; 1];
            while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
                name.push(b[0] as char);
            }
            assert!(name.starts_with("/dev/pts/"), "{name}");
            let script = format!(
                "dd if={name} bs=13 count=1 status=none; echo written >> {name} && echo wrote"
            );
            let o = run(
                who,
                ws.path(),
                &[
                    "--landlock",
                    landlock,
                    "--profile",
                    "shell",
                    "--timeout",
                    "20",
                    "--",
                    "bash",
                    "-c",
                    &script,
                ],
            );
            drop(held);
            let stdout = String::from_utf8_lossy(&o.stdout);
            if landlock == "off" {
                // Control (filtered tier): read what was typed, and written into it.
                assert!(
                    stdout.contains("secret-typed") && stdout.contains("wrote"),
                    "{who:?} control: {}",
                    text(&o)
                );
            } else {
                assert!(
                    !stdout.contains("secret-typed") && !stdout.contains("wrote"),
                    "{who:?}: {}",
                    text(&o)
                );
                assert!(
                    String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
                    "{who:?}: {}",
                    text(&o)
                );
            }
        }
    }
}

#[test]
fn terminals_the_job_creates_and_its_own_still_work() {
    let openpty = "import os, pty; m, s = pty.openpty(); os.write(s, b'ping\\n'); \
                   print('openpty', os.read(m, 4).decode(), os.ttyname(s).startswith('/dev/pts/'))";
    for who in BOTH {
        let ws = workspace(who);
        let script = format!(
            "python3 -c \"{openpty}\"; script -qec 'echo in-script; tty' /dev/null; echo script $?"
        );
        let o = run(
            who,
            ws.path(),
            &["--profile", "shell", "--", "bash", "-c", &script],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.contains("openpty ping True")
                && out.contains("in-script")
                && out.contains("script 0"),
            "{who:?}: {}",
            text(&o)
        );
        // Its own terminal, inherited as standard input and output: usable through the
        // descriptors (`stty` asks the terminal itself).
        let own = format!(
            "import os, pty, sys\n\
             pid, fd = pty.fork()\n\
             if pid == 0:\n\
             \x20   os.execv({SANDBOX:?}, [{SANDBOX:?}, 'run', '--allow-root', '--isolation', 'off', \
             '--profile', 'shell', '--', 'bash', '-c', 'test -t 0 && stty size && echo own-ok'])\n\
             out = b''\n\
             while True:\n\
             \x20   try:\n\
             \x20       b = os.read(fd, 1024)\n\
             \x20   except OSError:\n\
             \x20       break\n\
             \x20   if not b:\n\
             \x20       break\n\
             \x20   out += b\n\
             os.waitpid(pid, 0)\n\
             sys.stdout.write(out.decode())\n"
        );
        let o = command(who, "python3")
            .args(["-c", &own])
            .current_dir(ws.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("own-ok"), "{who:?} own: {}", text(&o));
    }
}

/// `sandbox run --allow-root --isolation off ARGS` (the contained tier) as `who` in `cwd`.
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--isolation", "off"];
    all.extend_from_slice(args);
    common::contained::run(who, cwd, &all)
}
