//! `sandbox serve --socket` against commands confined by the preload route (`eval "$(sandbox
//! env ...)"`): such a command runs as the server's uid, in the server's PID namespace and
//! cgroup, and is not the server's descendant, so only the seccomp mark it carries (a filter
//! cannot be removed, and everything it starts inherits it) tells it apart. Each attack asks
//! the server for a command without any sandbox that reads a secret the preload route denies;
//! the control is the same client unconfined, which gets the secret.

mod common;

use common::{command, As, BOTH, NOBODY, SANDBOX};
use serde_json::Value;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Connects to `argv[1]`, says whether the preload is mapped and how many seccomp filters
/// this process runs under, sends the escape request read from `argv[2]`, and prints the answer.
const CLIENT_PY: &str = r#"
import socket, sys
maps = open("/proc/self/maps").read()
status = open("/proc/self/status").read()
filters = [l.split()[1] for l in status.splitlines() if l.startswith("Seccomp_filters:")][0]
print("preload=%d filters=%s" % ("libsandbox" in maps, filters))
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:
    s.sendall(sys.argv[2].encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass  # refused: the server may have closed first; its answer is still readable
data = b""
try:
    while chunk := s.recv(65536):
        data += chunk
except ConnectionResetError:
    pass
sys.stdout.write(data.decode())
"#;

/// The same client as a static program: the preload cannot enter it.
const CLIENT_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
    (void)!write(s, argv[2], strlen(argv[2]));
    (void)!write(s, "\n", 1);
    shutdown(s, SHUT_WR);
    char buf[65536];
    ssize_t n;
    while ((n = read(s, buf, sizeof buf)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
}
"#;

/// A fake home with a key the preload route's Landlock layer denies (`~/.ssh`), a socket
/// path, and the static client, all owned by the user under test.
struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Setup {
    fn new(who: As) -> Setup {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("home/.ssh")).unwrap();
        // The commands' working directory: a project of its own (the setup's root holds the
        // home, which a default workspace may not).
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::write(root.join("home/.ssh/id_rsa"), "PRIVATE-KEY\n").unwrap();
        gcc(CLIENT_C, &root.join("client"));
        std::fs::write(root.join("client.py"), CLIENT_PY).unwrap();
        if who == As::Nobody {
            for p in [
                "",
                "ws",
                "home",
                "home/.ssh",
                "home/.ssh/id_rsa",
                "client",
                "client.py",
            ] {
                std::os::unix::fs::chown(root.join(p), Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        Setup { _dir: dir, root }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn socket(&self) -> PathBuf {
        self.root.join("s.sock")
    }

    /// The request a confined command would like to run: no sandbox at all, reading the key.
    fn escape(&self) -> String {
        let key = self.home().join(".ssh/id_rsa");
        serde_json::json!({
            "id": "esc",
            "argv": ["/bin/sh", "-c", format!("grep '^Seccomp:' /proc/self/status; cat {}", key.display())],
            "profile": "unrestricted", "isolation": "off", "landlock": "off",
        })
        .to_string()
    }

    /// `script` run as `who` through `bash -c`, the way agents run commands, with this
    /// setup's home; `$SOCK`, `$REQ`, `$SANDBOX` and `$DIR` are set for it.
    fn bash(&self, who: As, script: &str) -> String {
        let o = command(who, "/bin/bash")
            .arg("-c")
            .arg(script)
            .env("HOME", self.home())
            .env("SOCK", self.socket())
            .env("REQ", self.escape())
            .env("SANDBOX", SANDBOX)
            .env("DIR", &self.root)
            // `sandbox env` extracts the preload below it (removed with the directory), not
            // into a new directory in /tmp per call, as it would for uid 65534 without a home.
            .env("XDG_RUNTIME_DIR", &self.root)
            .current_dir(self.root.join("ws"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    }
}

/// A `sandbox serve --socket` run as `who`; killed on drop.
struct Serve(Child);

impl Serve {
    fn start(who: As, setup: &Setup) -> Serve {
        Serve::start_with(who, setup, None)
    }

    /// The server started through `wrapper` (which runs its arguments) when given.
    fn start_with(who: As, setup: &Setup, wrapper: Option<&Path>) -> Serve {
        let mut cmd = match wrapper {
            Some(w) => {
                let mut c = command(who, w);
                c.arg(SANDBOX);
                c
            }
            None => command(who, SANDBOX),
        };
        let child = cmd
            .args(["serve", "--socket"])
            .arg(setup.socket())
            .env("HOME", setup.home())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        // The file appears when the server listens (bind and listen come together); a
        // probing connection from this test would be refused for its uid under uid 65534.
        while !std::fs::symlink_metadata(setup.socket()).is_ok_and(|m| m.file_type().is_socket()) {
            assert!(start.elapsed() < Duration::from_secs(30), "server listens");
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve(child)
    }

    /// Stops the server (SIGTERM) and returns its stderr.
    fn stop(mut self) -> String {
        // SAFETY: a plain signal to the child this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
        let mut err = String::new();
        use std::io::Read;
        self.0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server's answer in `out` (the last line).
fn answer(out: &str) -> Value {
    let last = out.lines().rfind(|l| l.starts_with('{')).unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn assert_served(what: &str, out: &str) {
    let v = answer(out);
    assert_eq!(
        v["stdout"], "Seccomp:\t0\nPRIVATE-KEY\n",
        "{what}: control served: {out}"
    );
}

fn assert_refused(what: &str, out: &str) {
    let v = answer(out);
    assert_eq!(v["error"]["field"], "connection", "{what}: {out}");
    let reason = v["error"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("a sandbox confines it")
            && reason.contains("a sandboxed command may not submit requests"),
        "{what}: {out}"
    );
    assert!(!out.contains("PRIVATE-KEY"), "{what}: {out}");
}

const ENV_SHELL: &str = r#"eval "$("$SANDBOX" env --profile shell-network)""#;

#[test]
fn a_preload_confined_command_cannot_submit_requests() {
    for who in BOTH {
        let s = Setup::new(who);
        let srv = Serve::start(who, &s);

        // Controls: the same clients outside any sandbox get an unfiltered command that reads
        // the key.
        let out = s.bash(who, r#"python3 "$DIR/client.py" "$SOCK" "$REQ""#);
        assert!(out.starts_with("preload=0 filters=0"), "{who:?}: {out}");
        assert_served("python3 unconfined", &out);
        assert_served(
            "static unconfined",
            &s.bash(who, r#""$DIR/client" "$SOCK" "$REQ""#),
        );

        // The preload route really confines: the shell cannot read the key itself.
        let out = s.bash(
            who,
            &format!(r#"{ENV_SHELL}; cat "$HOME/.ssh/id_rsa" || echo DENIED"#),
        );
        assert!(
            out.contains("DENIED") && !out.contains("PRIVATE-KEY"),
            "{out}"
        );

        // The attack as reported: python3 under the preload-confined bash.
        let out = s.bash(
            who,
            &format!(r#"{ENV_SHELL}; python3 "$DIR/client.py" "$SOCK" "$REQ""#),
        );
        assert!(out.starts_with("preload=1 filters=1"), "{who:?}: {out}");
        assert_refused("python3 under the preload", &out);

        // A child that dropped LD_PRELOAD after its shell's filter was installed.
        let out = s.bash(
            who,
            &format!(r#"{ENV_SHELL}; env -u LD_PRELOAD python3 "$DIR/client.py" "$SOCK" "$REQ""#),
        );
        assert!(out.starts_with("preload=0 filters=1"), "{who:?}: {out}");
        assert_refused("python3 without LD_PRELOAD", &out);

        // A static program, which the preload cannot enter, started by a confined shell (the
        // shell that ran the `eval` is not confined itself: only what it starts afterwards).
        let out = s.bash(
            who,
            &format!(r#"{ENV_SHELL}; bash -c '"$DIR/client" "$SOCK" "$REQ"'"#),
        );
        assert_refused("static client", &out);

        // Landlock alone (`unrestricted` has no syscall list): the preload's marking filter.
        let out = s.bash(
            who,
            r#"eval "$("$SANDBOX" env --profile unrestricted)"; python3 "$DIR/client.py" "$SOCK" "$REQ""#,
        );
        assert!(out.starts_with("preload=1 filters=1"), "{who:?}: {out}");
        assert_refused("unrestricted (Landlock only)", &out);

        let err = srv.stop();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{who:?}: one line per refusal: {err}");
        assert!(
            lines.iter().all(|l| l.starts_with(
                "sandbox: serve: refused a connection from a sandboxed command: pid "
            ) && l.contains("seccomp filter")),
            "{err}"
        );
    }
}

/// Installs a seccomp filter that allows everything, then runs `argv[1..]`: the filter a
/// container runtime puts on everything in the container. Like Docker's, it is installed
/// without `no_new_privs` where the caller may (root holds CAP_SYS_ADMIN).
const FILTERED_C: &str = r#"
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = 1, .filter = &allow};
    if (geteuid() != 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) { perror("prctl"); return 1; }
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) { perror("seccomp"); return 1; }
    execv(argv[1], argv + 1);
    perror("execv");
    return 127;
}
"#;

/// A server that itself runs under a seccomp filter (a container's, or that of the agent
/// harness that started it) serves clients from the same place, and still refuses a command
/// confined there by the preload route, which carries one filter more.
#[test]
fn a_server_under_a_containers_filter_serves_its_peers_and_refuses_confined_ones() {
    for who in BOTH {
        let s = Setup::new(who);
        let filtered = s.root.join("filtered");
        gcc(FILTERED_C, &filtered);
        if who == As::Nobody {
            std::os::unix::fs::chown(&filtered, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let srv = Serve::start_with(who, &s, Some(&filtered));

        // Control: a client under the same filter is served (its command runs under the
        // server's filter too, and reads the key).
        let out = s.bash(
            who,
            r#""$DIR/filtered" /usr/bin/python3 "$DIR/client.py" "$SOCK" "$REQ""#,
        );
        assert!(out.starts_with("preload=0 filters=1"), "{who:?}: {out}");
        assert!(
            answer(&out)["stdout"]
                .as_str()
                .unwrap_or_default()
                .contains("PRIVATE-KEY"),
            "{out}"
        );

        // The preload route inside the same container: one filter more.
        let out = s.bash(
            who,
            &format!(r#""$DIR/filtered" /bin/bash -c '{ENV_SHELL}; python3 "$DIR/client.py" "$SOCK" "$REQ"'"#),
        );
        assert!(out.starts_with("preload=1 filters=2"), "{who:?}: {out}");
        assert_refused("python3 under the preload in the container", &out);

        // Landlock alone inside the container. As uid 65534 the server already has
        // `no_new_privs` (set with the container's filter), so only the preload's marking
        // filter tells this client from the control above, which has the same filter count
        // and `no_new_privs` without it.
        let out = s.bash(
            who,
            r#""$DIR/filtered" /bin/bash -c 'eval "$("$SANDBOX" env --profile unrestricted)"; python3 "$DIR/client.py" "$SOCK" "$REQ"'"#,
        );
        assert!(out.starts_with("preload=1 filters=2"), "{who:?}: {out}");
        assert_refused("Landlock alone in the container", &out);
        let err = srv.stop();
        assert_eq!(err.lines().count(), 2, "{err}");
    }
}

/// Compiles C `source` into `out` (`gcc -static`).
fn gcc(source: &str, out: &Path) {
    use std::io::Write;
    let mut c = Command::new("gcc")
        .args(["-static", "-O", "-o"])
        .arg(out)
        .args(["-x", "c", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(source.as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success(), "gcc {}", out.display());
}
