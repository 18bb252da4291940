//! A contained run inside a contained run (docs/isolation.md, "A sandbox inside a sandbox"):
//! an agent's job that runs `sandbox` itself, neither run with namespaces (`--isolation off`,
//! the outer allowing the three Landlock calls). The inner run used to fail at `execve` with
//! EACCES (its Landlock carve-out could not list `/`, which the outer's refuses) and, as uid
//! 65534, at `exec --json` (its private directory's `fchmod`, made by the outer supervisor,
//! which refuses a non-dumpable caller). Root and uid 65534 alike; each protection with its
//! control.

mod common;

use common::contained::{owned_dir, run, text};
use common::{As, BOTH, SANDBOX};
use serde_json::Value;
use std::path::Path;

const LANDLOCK_CALLS: &str = "landlock_create_ruleset:landlock_add_rule:landlock_restrict_self";

/// `sandbox run` as `who`, contained (`--isolation off`, `shell`, writing `outer` only, the
/// Landlock calls allowed so that an inner run has Landlock too), running `inner`.
fn outer(who: As, outer: &Path, inner: &[&str]) -> std::process::Output {
    let w = outer.to_str().unwrap();
    let mut args = vec![
        "--isolation",
        "off",
        "--profile",
        "shell",
        "--allow",
        LANDLOCK_CALLS,
        "--workspace",
        w,
        "--",
    ];
    args.extend(inner);
    run(who, outer, &args)
}

/// The `sandbox: refused ...` lines of a run's stderr.
fn refused_lines(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("sandbox: refused "))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_contained_run_inside_a_contained_run_runs_its_program_and_names_its_refusal_once() {
    for who in BOTH {
        let ws = owned_dir(who, "nested-");
        let inner_ws = ws.path().join("inner");
        std::fs::create_dir(&inner_ws).unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&inner_ws, Some(65534), Some(65534)).unwrap();
        }
        let iw = inner_ws.to_str().unwrap();
        let inner_run = |cmd: &[&str]| {
            let mut v = vec![
                SANDBOX,
                "run",
                "--allow-root",
                "--isolation",
                "off",
                "--profile",
                "shell",
                "--workspace",
                iw,
                "--",
            ];
            v.extend(cmd);
            v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
        };

        // The inner program runs.
        let args = inner_run(&["/bin/echo", "ok"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = outer(who, ws.path(), &args);
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n", "{who:?}");
        // The inner run has no supervisor of its own and does not probe for one: the outer
        // profile refuses the probe's pidfd_getfd, which it named before.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("was refused"), "{who:?}: {err}");
        assert!(
            err.contains("no seccomp listener here, so no supervisor makes those calls"),
            "{who:?}: {err}"
        );

        // `exec --json` inside (uid 65534's sandbox home, made in the job's TMPDIR), in the
        // contained tier.
        let req = serde_json::json!({
            "argv": ["/bin/echo", "ok"],
            "profile": "shell",
            "isolation": "off",
            "allow_root": true,
            "workspace": iw,
            "cwd": iw,
        });
        let req_path = ws.path().join("req.json");
        std::fs::write(&req_path, req.to_string()).unwrap();
        let cmd = format!("{SANDBOX} exec --json < {}", req_path.display());
        let o = outer(who, ws.path(), &["/bin/bash", "-c", &cmd]);
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{who:?}: {e}: {}", text(&o)));
        assert_eq!(v["tier"], "contained", "{who:?}: {v}");
        assert_eq!(v["exit_code"], 0, "{who:?}: {v}");
        assert_eq!(v["stdout"], "ok\n", "{who:?}: {v}");

        // A write outside the inner workspace (inside the outer's) is refused by the inner
        // run and named once, by it.
        let outside = ws.path().join("outside");
        let touch = format!("touch {}", outside.display());
        let args = inner_run(&["/bin/sh", "-c", &touch]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = outer(who, ws.path(), &args);
        assert!(!o.status.success(), "{who:?}: {}", text(&o));
        assert!(!outside.exists(), "{who:?}");
        let lines = refused_lines(&o);
        assert_eq!(lines.len(), 1, "{who:?}: {}", text(&o));
        assert!(
            lines[0].contains(outside.to_str().unwrap()) && lines[0].contains(iw),
            "{who:?}: {lines:?}"
        );
        // Control: the outer run alone lets the same command write there.
        let o = outer(who, ws.path(), &["/bin/sh", "-c", &touch]);
        assert!(o.status.success(), "{who:?}: {}", text(&o));
        assert!(outside.exists(), "{who:?}");
    }
}

/// The inner run's credentials stay unreadable: the outer's Landlock domain refuses them, which
/// is why the inner needs no carve-out around them. Control: outside any sandbox the same
/// user reads the file.
#[test]
fn credentials_stay_unreadable_to_the_inner_program() {
    for who in BOTH {
        let ws = owned_dir(who, "nested-cred-");
        let home = owned_dir(who, "nested-home-");
        let ssh = home.path().join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        let key = ssh.join("id_rsa");
        std::fs::write(&key, "SECRET\n").unwrap();
        if who == As::Nobody {
            for p in [&ssh, &key] {
                std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
            }
        }
        let k = key.to_str().unwrap();
        let mut c = common::command(who, SANDBOX);
        c.env("HOME", home.path()).current_dir(ws.path()).args([
            "run",
            "--allow-root",
            "--isolation",
            "off",
            "--profile",
            "shell",
            "--allow",
            LANDLOCK_CALLS,
            "--workspace",
            ws.path().to_str().unwrap(),
            "--",
            SANDBOX,
            "run",
            "--allow-root",
            "--isolation",
            "off",
            "--",
            "/bin/cat",
            k,
        ]);
        let o = c.output().unwrap();
        assert!(!o.status.success(), "{who:?}: {}", text(&o));
        assert!(!String::from_utf8_lossy(&o.stdout).contains("SECRET"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("Permission denied"), "{who:?}: {err}");
        // Control: the same user reads it without a sandbox.
        let o = common::command(who, "/bin/cat").arg(k).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "SECRET\n", "{who:?}");
    }
}

/// A path the inner run denies and the outer does not needs the carve-out, which cannot list
/// `/` under the outer run: the inner run is refused, naming the path (125), instead of
/// starting a program that could exec nothing. Control: without the deny path the inner
/// program reads the file (the outer allows it).
#[test]
fn a_deny_path_only_the_inner_run_has_is_refused_by_name() {
    for who in BOTH {
        let ws = owned_dir(who, "nested-deny-");
        let secret = ws.path().join("secret");
        std::fs::write(&secret, "INNER-ONLY\n").unwrap();
        if who == As::Nobody {
            std::os::unix::fs::chown(&secret, Some(65534), Some(65534)).unwrap();
        }
        let s = secret.to_str().unwrap();
        let inner = |deny: bool| {
            let mut v = vec![SANDBOX, "run", "--allow-root", "--isolation", "off"];
            if deny {
                v.extend(["--deny-read", s]);
            }
            v.extend(["--", "/bin/cat", s]);
            outer(who, ws.path(), &v)
        };
        let o = inner(true);
        assert_eq!(o.status.code(), Some(125), "{who:?}: {}", text(&o));
        assert!(!String::from_utf8_lossy(&o.stdout).contains("INNER-ONLY"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("reading around {s} cannot be granted here")),
            "{who:?}: {err}"
        );
        let o = inner(false);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "INNER-ONLY\n",
            "{who:?}: control: {}",
            text(&o)
        );
    }
}

/// The other two pairings run too, and a write outside every workspace is refused and named
/// once: a contained inner run under an isolated outer (the Landlock calls allowed; the inner
/// run names it), and a filtered inner run (Landlock refused by the outer profile) under a
/// contained outer (the outer names it; the inner run says its Landlock layer is missing).
/// Control: without either run the same command writes the file.
#[test]
fn an_isolated_outer_and_a_filtered_inner_pairing_run_and_name_the_refusal_once() {
    for who in BOTH {
        for (isolation, landlock) in [("preferred", true), ("off", false)] {
            let ws = owned_dir(who, "nested-pair-");
            let elsewhere = owned_dir(who, "nested-elsewhere-");
            let inner_ws = ws.path().join("inner");
            std::fs::create_dir(&inner_ws).unwrap();
            if who == As::Nobody {
                std::os::unix::fs::chown(&inner_ws, Some(65534), Some(65534)).unwrap();
            }
            let (w, iw) = (ws.path().to_str().unwrap(), inner_ws.to_str().unwrap());
            let outside = elsewhere.path().join("outside");
            let script = format!("echo ok; touch {}", outside.display());
            let mut args = vec!["--isolation", isolation, "--profile", "shell"];
            if landlock {
                args.extend(["--allow", LANDLOCK_CALLS]);
            }
            args.extend([
                "--workspace",
                w,
                "--",
                SANDBOX,
                "run",
                "--allow-root",
                "--isolation",
                "off",
                "--profile",
                "shell",
                "--workspace",
                iw,
                "--",
                "/bin/sh",
                "-c",
                &script,
            ]);
            let what = format!("{who:?} outer {isolation}");
            let o = run(who, ws.path(), &args);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                "ok\n",
                "{what}: {}",
                text(&o)
            );
            assert!(!outside.exists(), "{what}");
            let lines = refused_lines(&o);
            assert_eq!(lines.len(), 1, "{what}: {}", text(&o));
            assert!(
                lines[0].contains(outside.to_str().unwrap()),
                "{what}: {lines:?}"
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                err.contains("Landlock protections missing here"),
                !landlock,
                "{what}: {err}"
            );
            // Control: the same command alone.
            let o = common::command(who, "/bin/sh")
                .args(["-c", &script])
                .output()
                .unwrap();
            assert!(o.status.success(), "{what}: control: {}", text(&o));
            assert!(outside.exists(), "{what}: control");
        }
    }
}
