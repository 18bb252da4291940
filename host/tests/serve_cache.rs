//! The Landlock ruleset cache of a long-lived `sandbox serve` against a request that hides a
//! change from it: it creates a keyring file where a deny path was absent when the cached
//! ruleset was built (that ruleset grants its directory), then sets the directory's mtime back
//! with `touch -d`. The next request with the same settings must not get the stale ruleset.

mod common;

use common::{command, As, BOTH, NOBODY, SANDBOX};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Longer than the two seconds after its last change during which a watched directory keeps
/// a ruleset from being reused: the attack below waits that long, so only the ctime can
/// give it away.
const SETTLE: Duration = Duration::from_millis(2200);

#[test]
fn a_request_that_resets_an_mtime_cannot_make_the_next_one_reuse_a_stale_ruleset() {
    for who in BOTH {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let home = dir.path().join("home");
        let share = home.join(".local/share");
        let ws = home.join("proj");
        for d in [&share, &ws] {
            std::fs::create_dir_all(d).unwrap();
        }
        if who == As::Nobody {
            for p in [dir.path(), &home, &home.join(".local"), &share, &ws] {
                std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        // `.local/share/keyrings` is on the default deny list; absent, it protects nothing, and
        // the ruleset grants `.local/share` with everything that later appears in it.
        let keyring = share.join("keyrings/login.keyring");
        std::thread::sleep(SETTLE);

        let mut server = command(who, SANDBOX)
            .args(["serve", "--max-concurrent", "1"])
            .env("HOME", &home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = server.stdin.take().unwrap();
        let mut output = BufReader::new(server.stdout.take().unwrap());
        let mut ask = |req: Value| -> Value {
            writeln!(input, "{req}").unwrap();
            let mut line = String::new();
            output.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
        };
        let read = |id: &str, landlock: &str| {
            json!({"id": id, "argv": ["/bin/cat", keyring], "profile": "shell",
                   "workspace": ws, "cwd": ws, "landlock": landlock})
        };

        // The ruleset for these settings is built (and cached) while there is no keyring.
        let v = ask(read("before", "preferred"));
        assert_eq!(v["exit_code"], 1, "{who:?}: {v}");

        // The attack: create the keyring, then put `.local/share`'s times back.
        let before = stat_y(&share);
        let script = format!(
            "t=$(stat -c %y {share}) && mkdir {share}/keyrings && echo SECRET-KEYRING > {k} \
             && touch -d \"$t\" {share}",
            share = share.display(),
            k = keyring.display()
        );
        // `.local/share` holds a credential path: a broad workspace, allowed by name here.
        let v = ask(json!({"id": "plant", "argv": ["/bin/sh", "-c", script],
            "profile": "shell", "workspace": share, "cwd": share,
            "allow_broad_workspace": true}));
        assert_eq!(v["exit_code"], 0, "{who:?}: {v}");
        assert_eq!(stat_y(&share), before, "{who:?}: the mtime was put back");
        std::thread::sleep(SETTLE);

        // The next request with the first one's settings: the keyring is denied.
        let v = ask(read("after", "preferred"));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(!v["stdout"].to_string().contains("SECRET"), "{who:?}: {v}");
        // Control: the file is there and readable without the layer.
        let v = ask(read("control", "off"));
        assert_eq!(v["stdout"], "SECRET-KEYRING\n", "{who:?}: {v}");

        drop(input);
        let o = server.wait_with_output().unwrap();
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{who:?}");
    }
}

/// `stat -c %y PATH`: the modification time as the attack's script printed it.
fn stat_y(p: &Path) -> String {
    let o = std::process::Command::new("stat")
        .args(["-c", "%y"])
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
