//! A python3 unix-socket listener outside the sandbox, as a host service would be (an agent,
//! tmux, Docker, `/dev/log`): the tests reach for it from inside and look at its log.

use super::{command, As};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A child process killed and reaped when dropped, even after a failed assertion.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to 20 s for `p` to exist.
pub fn wait_for(p: &Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while !p.exists() {
        assert!(Instant::now() < until, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `p` with `s` appended to its name.
pub fn suffixed(p: &Path, s: &str) -> PathBuf {
    PathBuf::from(format!("{}{s}", p.display()))
}

/// A python3 listener run by `who` at `path`, bound when this returns: a stream one answers
/// `pong` and logs `connected`, a datagram one logs what it gets, in `path.log`.
pub fn listener(who: As, path: &Path, datagram: bool) -> Killed {
    let script = r#"
import os, socket, sys
path, kind = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM if kind == "dgram" else socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
if kind == "dgram":
    open(path + ".ready", "w").close()
    while True:
        data = s.recv(100)
        with open(path + ".log", "ab") as f:
            f.write(data + b"\n")
else:
    s.listen(8)
    open(path + ".ready", "w").close()
    while True:
        c, _ = s.accept()
        with open(path + ".log", "ab") as f:
            f.write(b"connected\n")
        c.sendall(b"pong")
        c.close()
"#;
    for p in [
        path.to_path_buf(),
        suffixed(path, ".ready"),
        suffixed(path, ".log"),
    ] {
        let _ = fs::remove_file(p);
    }
    let child = command(who, "python3")
        .args(["-c", script])
        .arg(path)
        .arg(if datagram { "dgram" } else { "stream" })
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&suffixed(path, ".ready"));
    Killed(child)
}
