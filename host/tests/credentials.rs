//! The credential list (`profiles/credentials.toml`) against the real kernel: the stores the
//! security review found readable stay unreadable under the default profile, as root and as
//! uid 65534 (each with a HOME of its own), through `sandbox run` and `sandbox exec --json`,
//! with the refusal named; the controls read the same files without the sandbox, and a plain
//! settings file beside a secret stays readable inside.

mod common;

use common::{command, output_with_input, sandbox, As, BOTH, NOBODY};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The stores of the finding, relative to HOME, each with the kind that names it.
const SECRETS: &[(&str, &str)] = &[
    (".claude/.credentials.json", "agent"),
    (".cargo/credentials.toml", "package-manager"),
    (".aws/credentials", "cloud"),
    (".docker/config.json", "container"),
    (".kube/config", "container"),
];

/// A file beside a secret that is not one.
const PLAIN: &str = ".cargo/config.toml";

/// A HOME owned by `who`, with every file of [`SECRETS`] (mode 0600) and [`PLAIN`], in a
/// directory uid 65534 can reach (the target directory, not the shared /tmp a job may replace
/// with a private one). The directory lives as long as the returned guard.
fn home(who: As) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("cred-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let home = dir.path().join("home");
    for (i, (rel, _)) in SECRETS.iter().enumerate() {
        let p = home.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, format!("SECRET-{i}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    }
    fs::write(home.join(PLAIN), "PUBLIC-SETTINGS\n").unwrap();
    if who == As::Nobody {
        chown_tree(&home);
    }
    (dir, home)
}

fn chown_tree(p: &Path) {
    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    if p.is_dir() {
        for e in fs::read_dir(p).unwrap() {
            chown_tree(&e.unwrap().path());
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `sandbox run` of `cat path` under the default profile, as `who` with `home` as HOME.
fn run_cat(who: As, home: &Path, path: &Path) -> Output {
    let mut c = sandbox(who);
    c.env("HOME", home).current_dir(home.parent().unwrap());
    if who == As::Root {
        c.arg("run").arg("--allow-root");
    } else {
        c.arg("run");
    }
    c.arg("--").arg("cat").arg(path).output().unwrap()
}

/// `sandbox exec --json` of `cat path`: the result object.
fn exec_cat(who: As, home: &Path, path: &Path) -> serde_json::Value {
    let mut c = sandbox(who);
    c.env("HOME", home)
        .current_dir(home.parent().unwrap())
        .args(["exec", "--json"]);
    let req = serde_json::json!({ "argv": ["cat", path] });
    let out = output_with_input(&mut c, req.to_string().as_bytes());
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", text(&out.stdout), text(&out.stderr)))
}

/// The result's warnings that name a refused read of `path`.
fn refusals(result: &serde_json::Value, path: &Path) -> Vec<String> {
    let wanted = format!("sandbox: refused: reading {}:", path.display());
    result["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.starts_with(&wanted))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_reviewed_credential_stores_are_unreadable_as_root_and_nobody() {
    for who in BOTH {
        let (_guard, home) = home(who);
        for (i, (rel, kind)) in SECRETS.iter().enumerate() {
            let path = home.join(rel);
            let secret = format!("SECRET-{i}");
            // Control: the same user reads it without the sandbox.
            let out = command(who, "cat")
                .env("HOME", &home)
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success() && text(&out.stdout).contains(&secret),
                "{who:?} {rel} (control): {out:?}"
            );
            let out = run_cat(who, &home, &path);
            assert!(
                !out.status.success() && !text(&out.stdout).contains(&secret),
                "{who:?} {rel}: read inside: {out:?}"
            );
            assert!(
                text(&out.stderr).contains("Permission denied"),
                "{who:?} {rel}: {out:?}"
            );
            let result = exec_cat(who, &home, &path);
            assert_ne!(result["exit_code"], 0, "{who:?} {rel}: {result}");
            assert!(
                !result["stdout"].as_str().unwrap().contains(&secret),
                "{who:?} {rel}: {result}"
            );
            let named = refusals(&result, &path);
            assert_eq!(named.len(), 1, "{who:?} {rel}: {result}");
            assert!(
                named[0].contains(&format!("({kind}: ")) && named[0].contains("landlock \"off\""),
                "{who:?} {rel}: {}",
                named[0]
            );
        }
        // A plain settings file beside a secret stays readable, with nothing on stderr.
        let plain = home.join(PLAIN);
        let out = run_cat(who, &home, &plain);
        assert!(
            out.status.success() && text(&out.stdout) == "PUBLIC-SETTINGS\n",
            "{who:?} {PLAIN}: {out:?}"
        );
        assert!(out.stderr.is_empty(), "{who:?}: {}", text(&out.stderr));
        let result = exec_cat(who, &home, &plain);
        assert_eq!(result["exit_code"], 0, "{who:?}: {result}");
        assert_eq!(
            result["warnings"],
            serde_json::json!([]),
            "{who:?}: {result}"
        );
    }
}

#[test]
fn etc_shadow_is_unreadable_for_root() {
    let (_guard, home) = home(As::Root);
    let shadow = Path::new("/etc/shadow");
    // Control: root reads it without the sandbox.
    let out = command(As::Root, "cat").arg(shadow).output().unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"root:"),
        "{out:?}"
    );
    let out = run_cat(As::Root, &home, shadow);
    assert!(
        !out.status.success() && !text(&out.stdout).contains("root:"),
        "{out:?}"
    );
    let result = exec_cat(As::Root, &home, shadow);
    assert_ne!(result["exit_code"], 0, "{result}");
    let named = refusals(&result, shadow);
    assert!(
        named.len() == 1 && named[0].contains("(system: "),
        "{result}"
    );
    // The rest of /etc stays readable.
    let out = run_cat(As::Root, &home, Path::new("/etc/passwd"));
    assert!(
        out.status.success() && out.stdout.starts_with(b"root:"),
        "{out:?}"
    );
}

#[test]
fn profiles_credentials_prints_the_list_for_the_caller() {
    for who in BOTH {
        let out = sandbox(who)
            .env("HOME", "/home/u")
            .args(["profiles", "credentials"])
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        let lines: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
        for (rel, _) in SECRETS {
            // The five files lie in listed directories or are listed themselves.
            let path = Path::new("/home/u").join(rel);
            assert!(
                lines.iter().any(|l| path.starts_with(l)),
                "{who:?}: {rel} not covered: {lines:?}"
            );
        }
        assert!(!lines.contains(&"/home/u/.cargo".to_owned()));
        assert_eq!(
            lines.contains(&"/etc/shadow".to_owned()),
            who == As::Root,
            "{who:?}: {lines:?}"
        );

        let out = sandbox(who)
            .env("HOME", "/home/u")
            .args(["profiles", "credentials", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        let entries: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let shadow = entries
            .iter()
            .find(|e| e["path"] == "/etc/shadow")
            .expect("/etc/shadow listed");
        assert_eq!(shadow["kind"], "system");
        assert_eq!(shadow["root_only"], true);
        let resolved = if who == As::Root {
            serde_json::json!(["/etc/shadow"])
        } else {
            serde_json::json!([])
        };
        assert_eq!(shadow["resolved"], resolved, "{who:?}");
        let claude = entries
            .iter()
            .find(|e| e["path"] == "~/.claude/.credentials.json")
            .expect("the Claude Code entry");
        assert_eq!(claude["kind"], "agent");
        assert!(!claude["reason"].as_str().unwrap().is_empty());
        assert_eq!(
            claude["resolved"],
            serde_json::json!(["/home/u/.claude/.credentials.json"])
        );
    }
}

#[test]
fn profiles_credentials_without_home_lists_no_home_entries() {
    // A relative HOME is not trusted (as for the runners): no `~/` entry resolves.
    let out = sandbox(As::Nobody)
        .env("HOME", "relative")
        .args(["profiles", "credentials"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!text(&out.stdout).contains("relative"), "{out:?}");
}

#[test]
fn profiles_credentials_refuses_bad_input() {
    // A newline in HOME would split a path over two lines: refused, as the runners refuse it.
    let out = sandbox(As::Nobody)
        .env("HOME", "/home/a\nb")
        .args(["profiles", "credentials"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = text(&out.stderr);
    assert!(
        err.starts_with("sandbox: profiles credentials: \"/home/a\\nb/") && err.contains("HOME"),
        "{err}"
    );
    // Control: the runner refuses to run with that HOME as well.
    let out = sandbox(As::Nobody)
        .env("HOME", "/home/a\nb")
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    // Unknown arguments and values are usage errors.
    for args in [
        &["profiles", "credentials", "--json=1"][..],
        &["profiles", "credentials", "extra"],
        &["profiles", "credentials", "--raw"],
    ] {
        let out = sandbox(As::Nobody).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty() && !out.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn runtime_dir_entries_are_denied_where_xdg_runtime_dir_points() {
    for who in BOTH {
        let (guard, home) = home(who);
        let run = guard.path().join("run");
        let auth = run.join("containers/auth.json");
        fs::create_dir_all(auth.parent().unwrap()).unwrap();
        fs::write(&auth, "SECRET-PODMAN\n").unwrap();
        if who == As::Nobody {
            chown_tree(&run);
        }
        let cat = |runtime: Option<&Path>| {
            let mut c = sandbox(who);
            c.env("HOME", &home).current_dir(guard.path());
            if let Some(r) = runtime {
                c.env("XDG_RUNTIME_DIR", r);
            }
            c.args(["run", "--allow-root", "--", "cat"])
                .arg(&auth)
                .output()
                .unwrap()
        };
        let out = cat(Some(&run));
        assert!(
            !out.status.success() && !text(&out.stdout).contains("SECRET"),
            "{who:?}: {out:?}"
        );
        // Control: without XDG_RUNTIME_DIR the entry does not apply and the file is read.
        let out = cat(None);
        assert_eq!(text(&out.stdout), "SECRET-PODMAN\n", "{who:?}: {out:?}");
    }
}

/// A credential path below a directory this user may not search (root's private `.local` in a
/// service account's home of `/`) is one the job cannot reach either: the run goes ahead,
/// where it used to fail every request with `deny_read: cannot open ...: Permission denied`.
#[test]
fn a_credential_path_this_user_cannot_reach_does_not_fail_the_run() {
    let home = tempfile::Builder::new()
        .prefix("cred-unreachable")
        .tempdir()
        .unwrap();
    fs::set_permissions(home.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let private = home.path().join(".local");
    fs::create_dir_all(private.join("share")).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let work = tempfile::Builder::new()
        .prefix("cred-unreachable-work")
        .tempdir()
        .unwrap();
    fs::set_permissions(work.path(), fs::Permissions::from_mode(0o777)).unwrap();
    // Control: uid 65534 cannot even look below the private directory.
    let stat = command(As::Nobody, "stat")
        .arg(private.join("share/keyrings"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&stat.stderr).contains("Permission denied"),
        "{stat:?}"
    );
    let out = output_with_input(
        sandbox(As::Nobody)
            .args(["exec", "--json"])
            .env("HOME", home.path())
            .current_dir(work.path()),
        br#"{"argv":["/bin/echo","ran"],"profile":"minimal"}"#,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"stdout\":\"ran\\n\""), "{text}");
}
