//! `ls /` and `ls ~` list what the view shows. In the isolated tier the credential list is
//! covered by the view (empty mode-000 files and directories bound over each path that
//! exists), so Landlock grants reading the whole tree; the credentials stay unreadable and
//! their refusals named. Without a view (`isolation: off`) Landlock's carve-out stays: the
//! control, where the directories above a credential cannot be listed.

mod common;

use common::{output_with_input, sandbox, As, BOTH};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- view-listing-test";

/// A directory `who` owns, under /var/tmp (outside the view's private /tmp).
fn dir(who: As) -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(who, d.path());
    d
}

fn chown(who: As, p: &Path) {
    if who == As::Nobody {
        let ok = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

/// A home with a private key and a note, owned by `who`.
fn home(who: As) -> tempfile::TempDir {
    let h = dir(who);
    std::fs::create_dir(h.path().join(".ssh")).unwrap();
    std::fs::write(h.path().join(".ssh/id_rsa"), KEY).unwrap();
    std::fs::set_permissions(
        h.path().join(".ssh/id_rsa"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::write(h.path().join("notes.txt"), "notes").unwrap();
    // Again: the files were made after the directory was given away.
    chown(who, h.path());
    h
}

/// One line per step: `NAME: ok N` (the listing's entry count) or `NAME: failed`.
const SCRIPT: &str = r#"
for d in / "$1" /etc; do
  if out=$(ls -A "$d" 2>/dev/null); then echo "ls $d: ok $(printf '%s\n' "$out" | wc -l)"; else echo "ls $d: failed"; fi
done
ls -A "$1"
cat "$1/.ssh/id_rsa"
cat "/proc/self/root$1/.ssh/id_rsa" "/proc/1/root$1/.ssh/id_rsa"
ln "$1/.ssh/id_rsa" ./key-link && cat ./key-link
cat /etc/shadow
true
"#;

fn exec(who: As, home: &Path, ws: &Path, isolation: &str) -> Value {
    let req = json!({
        "argv": ["/bin/sh", "-c", SCRIPT, "sh", home],
        "profile": "shell",
        "cwd": ws,
        "isolation": isolation,
    });
    let mut c = sandbox(who);
    c.args(["exec", "--json"]).env("HOME", home);
    let out = output_with_input(&mut c, req.to_string().as_bytes());
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn listed(v: &Value, d: &str) -> bool {
    let out = v["stdout"].as_str().unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("ls {d}: ")))
        .is_some_and(|r| {
            r.strip_prefix("ok ")
                .is_some_and(|n| n.parse::<u32>().unwrap() > 0)
        })
}

/// Whether the result's Landlock layer reports `what` enforced.
fn enforced(v: &Value, what: &str) -> bool {
    v["landlock"]["enforced"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x == what))
}

#[test]
fn the_view_lists_the_tree_and_keeps_credentials_unreadable() {
    for who in BOTH {
        let home = home(who);
        let ws = dir(who);
        let h = home.path().to_str().unwrap();
        let v = exec(who, home.path(), ws.path(), "required");
        let at = format!("{who:?} isolated");
        assert_eq!(v["tier"], "isolated", "{at}: {v}");
        // Read denial is the covers' work here: Landlock planned no carve-out.
        assert!(enforced(&v, "fs-read-deny"), "{at}: {v}");
        assert_eq!(v["landlock"]["covered"], true, "{at}: {v}");
        for d in ["/", h, "/etc"] {
            assert!(listed(&v, d), "{at}: ls {d}: {v}");
        }
        let out = v["stdout"].as_str().unwrap();
        // The home lists its entries, the credential directory among them.
        assert!(
            out.contains("notes.txt") && out.contains(".ssh"),
            "{at}: {v}"
        );
        // The key stays unreadable, named as a credential.
        assert!(!out.contains(KEY), "{at}: {v}");
        let err = v["stderr"].as_str().unwrap();
        assert!(
            err.contains(&format!("{h}/.ssh/id_rsa: Permission denied")),
            "{at}: {v}"
        );
        assert!(err.contains("/etc/shadow: Permission denied"), "{at}: {v}");
        let refusals = v["refusals"].as_array().unwrap();
        assert!(
            refusals
                .iter()
                .any(|r| r["path"] == format!("{h}/.ssh/id_rsa")
                    && r["rule"] == "unreadable: a credential (the deny list)"),
            "{at}: {v}"
        );
        if who == As::Root {
            assert!(
                refusals.iter().any(|r| r["path"] == "/etc/shadow"),
                "{at}: {v}"
            );
        }

        // Control: without the view, Landlock's carve-out cannot grant the directories above
        // a credential, which then cannot be listed; the credential is refused all the same.
        let v = exec(who, home.path(), ws.path(), "off");
        let at = format!("{who:?} without a view");
        assert!(v["error"].is_null(), "{at}: {v}");
        assert_ne!(v["tier"], "isolated", "{at}: {v}");
        assert!(enforced(&v, "fs-read-deny"), "{at}: {v}");
        assert!(v["landlock"]["covered"].is_null(), "{at}: {v}");
        // Not a listing that failed for another reason: /usr has no credential above it.
        assert!(
            v["stderr"].as_str().unwrap().contains("Permission denied"),
            "{at}: {v}"
        );
        assert!(!listed(&v, h), "{at}: {v}");
        assert!(!listed(&v, "/"), "{at}: {v}");
        if who == As::Root {
            assert!(!listed(&v, "/etc"), "{at}: {v}");
        }
        assert!(!v["stdout"].as_str().unwrap().contains(KEY), "{at}: {v}");
    }
}

#[test]
fn run_lists_the_home_and_refuses_its_key() {
    for who in BOTH {
        let home = home(who);
        let ws = dir(who);
        let h = home.path().to_str().unwrap();
        let o = sandbox(who)
            .args([
                "run",
                "--allow-root",
                "--profile",
                "shell",
                "--",
                "/bin/sh",
                "-c",
                SCRIPT,
                "sh",
                h,
            ])
            .env("HOME", h)
            .current_dir(ws.path())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        for d in ["/", h, "/etc"] {
            assert!(
                out.contains(&format!("ls {d}: ok ")),
                "{who:?}: ls {d}: {out}{err}"
            );
        }
        assert!(!out.contains(KEY), "{who:?}: {out}");
        assert!(
            err.contains(&format!("sandbox: refused: reading {h}/.ssh/id_rsa")),
            "{who:?}: {err}"
        );
    }
}
