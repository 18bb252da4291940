//! Refusals of the view, Landlock and the network mode named from what real programs print
//! (docs/exec.md, `refusals`), through `sandbox exec --json` and `sandbox run`, as root and as
//! uid 65534. Each named refusal has a control: the advice applied makes the program succeed,
//! or the same program without the protection does what it asked; and programs that print
//! the same words about problems that are not the sandbox's get nothing.

use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;

use common::{output_with_input, sandbox, As, BOTH};

/// A directory under `/var/tmp` (the view replaces `/tmp`) that `who` owns, removed on drop.
fn dir(who: As, prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    if who == As::Nobody {
        chown_all(d.path());
    }
    d
}

fn chown_all(p: &Path) {
    let ok = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// `sandbox exec --json` with `request` as `who` (HOME as given, else the bare default).
fn exec(who: As, home: Option<&Path>, request: Value) -> Value {
    let mut c = sandbox(who);
    c.args(["exec", "--json"]).stderr(Stdio::piped());
    if let Some(h) = home {
        c.env("HOME", h);
    }
    let out = output_with_input(&mut c, request.to_string().as_bytes());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `sandbox run ARGS` as `who` in `cwd`, stderr a pipe (as agents run it).
fn run(who: As, cwd: &Path, args: &[&str]) -> Output {
    sandbox(who)
        .arg("run")
        .arg("--allow-root")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("sandbox run")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refusals(v: &Value) -> &Vec<Value> {
    v["refusals"].as_array().unwrap_or_else(|| panic!("{v}"))
}

#[test]
fn a_write_outside_the_workspace_is_named_and_its_advice_works() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let out = dir(who, "refusals-out");
        let target = out.path().join("f");
        let t = target.to_str().unwrap();
        let o = out.path().to_str().unwrap();
        let request = |writable: &[&str]| {
            json!({
                "argv": ["/bin/bash", "-c", format!("touch {t}")],
                "profile": "shell",
                "cwd": ws.path(),
                "workspace": ws.path(),
                "writable_paths": writable,
            })
        };
        let v = exec(who, None, request(&[]));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["path"], t, "{v}");
        assert_eq!(r[0]["operation"], "touch", "{v}");
        assert!(
            r[0]["rule"]
                .as_str()
                .unwrap()
                .starts_with("read-only in the sandbox: outside the writable places (workspace "),
            "{v}"
        );
        let allow = format!("\"writable_paths\": [\"{o}\"]");
        assert_eq!(r[0]["allow"], allow.as_str(), "{v}");
        let warned = v["warnings"].as_array().unwrap();
        assert!(
            warned.iter().any(|w| w
                .as_str()
                .unwrap()
                .starts_with(&format!("sandbox: refused {t}"))),
            "{v}"
        );
        assert!(!target.exists());

        // Control: the advice is right.
        let v = exec(who, None, request(&[o]));
        assert_eq!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(target.exists(), "{who:?}: {v}");
        assert_eq!(refusals(&v).len(), 0, "{v}");
        fs::remove_file(&target).unwrap();

        // The same through `sandbox run`, advice on stderr, and applied.
        let ws_arg = ws.path().to_str().unwrap();
        let cmd = format!("touch {t}");
        let base = ["--profile", "shell", "--workspace", ws_arg];
        let r = run(
            who,
            ws.path(),
            &[&base[..], &["--", "bash", "-c", &cmd]].concat(),
        );
        let err = stderr(&r);
        assert!(!r.status.success(), "{who:?}: {err}");
        assert!(
            err.contains(&format!(
                "sandbox: refused {t} (touch): read-only in the sandbox: outside the writable \
                 places (workspace {ws_arg}); to allow: --allow-write {o}"
            )),
            "{who:?}: {err}"
        );
        let r = run(
            who,
            ws.path(),
            &[&base[..], &["--allow-write", o, "--", "bash", "-c", &cmd]].concat(),
        );
        assert!(r.status.success(), "{who:?}: {}", stderr(&r));
        assert_eq!(
            stderr(&r),
            "",
            "{who:?}: nothing on stderr when all is well"
        );
        assert!(target.exists());
    }
}

#[test]
fn a_credential_is_named_as_one() {
    for who in BOTH {
        let home = dir(who, "refusals-home");
        let ssh = home.path().join(".ssh");
        fs::create_dir(&ssh).unwrap();
        let key = ssh.join("id_rsa");
        fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
        if who == As::Nobody {
            chown_all(home.path());
        }
        let ws = dir(who, "refusals-ws");
        let script = format!("print(open('{}').read())", key.display());
        let request = |landlock: &str| {
            json!({
                "argv": ["/usr/bin/env", "python3", "-c", script],
                "profile": "shell",
                "cwd": ws.path(),
                "landlock": landlock,
            })
        };
        let v = exec(who, Some(home.path()), request("required"));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(v["stderr"].as_str().unwrap().contains("[Errno 13]"), "{v}");
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["path"], key.to_str().unwrap(), "{v}");
        assert_eq!(r[0]["rule"], "unreadable: a credential (the deny list)");
        assert_eq!(r[0]["allow"], Value::Null);
        // Said once in `warnings`, by the credential list's own line.
        let said: Vec<&Value> = v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w.as_str().unwrap().contains(key.to_str().unwrap()))
            .collect();
        assert_eq!(said.len(), 1, "{v}");

        // Control: without Landlock the key is read, and nothing is named.
        let v = exec(who, Some(home.path()), request("off"));
        assert_eq!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(v["stdout"].as_str().unwrap().contains("PRIVATE KEY"), "{v}");
        assert_eq!(refusals(&v).len(), 0, "{v}");
    }
}

#[test]
fn a_protected_repository_file_is_named_as_one() {
    for who in BOTH {
        let ws = dir(who, "refusals-repo");
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(ws.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
        if who == As::Nobody {
            chown_all(ws.path());
        }
        // The hooks stay read-only (the configuration is checked after the job instead:
        // host/tests/git_guard.rs).
        let hook = ws.path().join(".git/hooks/pre-commit");
        let line = format!("echo planted > {}", hook.display());
        let request = |isolation: &str| {
            json!({
                "argv": ["/bin/sh", "-c", line],
                "profile": "shell",
                "cwd": ws.path(),
                "isolation": isolation,
            })
        };
        let v = exec(who, None, request("required"));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["path"], hook.to_str().unwrap(), "{v}");
        assert_eq!(
            r[0]["rule"],
            "protected: the repository's hooks and config are read-only"
        );
        assert!(!hook.exists());

        // Control: without the namespace layer the hook is planted, and nothing is named.
        let v = exec(who, None, request("off"));
        assert_eq!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(hook.exists());
        assert_eq!(refusals(&v).len(), 0, "{v}");
    }
}

#[test]
fn a_failed_lookup_without_network_is_named_with_the_narrowest_change() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let curl = |profile: &str, network: Option<&str>| {
            let mut r = json!({
                "argv": ["/usr/bin/curl", "-sS", "http://example.invalid/"],
                "profile": profile,
                "cwd": ws.path(),
            });
            if let Some(n) = network {
                r["network"] = json!(n);
            }
            r
        };
        let v = exec(who, None, curl("shell", None));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["destination"], "example.invalid", "{v}");
        assert_eq!(r[0]["rule"], "no network: profile shell has none");
        assert_eq!(r[0]["allow"], "\"allow_domains\": [\"example.invalid\"]");

        // An explicit `none` is named as such, and the change adds the proxy mode.
        let v = exec(who, None, curl("shell-network", Some("none")));
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["rule"], "no network: \"network\": \"none\"");
        assert_eq!(
            r[0]["allow"],
            "\"network\": \"proxy\", \"allow_domains\": [\"example.invalid\"]"
        );

        // Control: the same failure with the host's network is not the sandbox's.
        let v = exec(who, None, curl("shell-network", Some("host")));
        assert_ne!(v["exit_code"], 0, "{who:?}: {v}");
        assert!(
            v["stderr"]
                .as_str()
                .unwrap()
                .contains("Could not resolve host"),
            "{v}"
        );
        assert_eq!(refusals(&v).len(), 0, "{v}");

        // Python's resolver, through `sandbox run`: named on stderr, with a placeholder
        // where the text names no host.
        let r = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell",
                "--",
                "python3",
                "-c",
                "import socket; socket.getaddrinfo('pypi.org', 443)",
            ],
        );
        let err = stderr(&r);
        assert!(
            err.contains(
                "sandbox: refused a name lookup (resolve): no network: profile shell has none; \
                 to allow: --allow-domain NAME"
            ),
            "{who:?}: {err}"
        );
    }
}

#[test]
fn a_hidden_socket_is_named_with_its_change() {
    for who in BOTH {
        let d = dir(who, "refusals-sock");
        let path = d.path().join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o777)).unwrap();
        let ws = dir(who, "refusals-ws");
        let p = path.to_str().unwrap();
        let script = "import socket, sys\n\
                      s = socket.socket(socket.AF_UNIX)\n\
                      try:\n    s.connect(sys.argv[1])\n\
                      except OSError as e:\n    sys.exit(f'{sys.argv[1]}: {e.strerror}')\n";
        let args = |allow: &[&str]| -> Vec<String> {
            ["--profile", "shell-network"]
                .iter()
                .chain(allow)
                .chain(&["--", "python3", "-c", script, p])
                .map(|s| s.to_string())
                .collect()
        };
        let a = args(&[]);
        let r = run(
            who,
            ws.path(),
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let err = stderr(&r);
        assert!(
            err.contains(&format!("{p}: Connection refused")),
            "{who:?}: {err}"
        );
        assert!(
            err.contains(&format!(
                "sandbox: refused {p} (connect): hidden: a host unix socket outside the \
                 workspace; to allow: --allow-unix-socket {p}"
            )),
            "{who:?}: {err}"
        );
        // Control: the advice is right.
        let a = args(&["--allow-unix-socket", p]);
        let r = run(
            who,
            ws.path(),
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(r.status.success(), "{who:?}: {}", stderr(&r));
        assert_eq!(stderr(&r), "");
    }
}

#[test]
fn problems_that_are_not_the_sandboxs_are_not_named() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let locked = ws.path().join("locked");
        fs::create_dir(&locked).unwrap();
        if who == As::Nobody {
            chown_all(ws.path());
        }
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let inside = locked.join("f");
        // A genuinely unwritable place in the workspace (root is not held back by the mode,
        // so its program prints the same words itself), and, as uid 65534, a host directory
        // it cannot write outside.
        let cmd = format!(
            "touch {0} || true; [ -e {0} ] || echo \"touch: cannot touch '{0}': Permission denied\" >&2; \
             touch /root/sandbox-refusals-x",
            inside.display()
        );
        let v = exec(
            who,
            None,
            json!({
                "argv": ["/bin/bash", "-c", cmd],
                "profile": "shell",
                "cwd": ws.path(),
            }),
        );
        let err = v["stderr"].as_str().unwrap();
        assert!(err.contains("Permission denied"), "{who:?}: {v}");
        let named: Vec<&str> = refusals(&v)
            .iter()
            .map(|r| r["path"].as_str().unwrap())
            .collect();
        assert!(!named.contains(&inside.to_str().unwrap()), "{who:?}: {v}");
        if who == As::Nobody {
            assert!(named.is_empty(), "{v}");
        }
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();

        // Nothing printed, nothing added; `run` says nothing.
        let v = exec(
            who,
            None,
            json!({"argv": ["/bin/true"], "profile": "shell", "cwd": ws.path()}),
        );
        assert_eq!(refusals(&v).len(), 0, "{v}");
        assert_eq!(v["refusals_omitted"], 0, "{v}");
        let r = run(who, ws.path(), &["--profile", "shell", "--", "true"]);
        assert_eq!(stderr(&r), "", "{who:?}");
    }
}

#[test]
fn a_forged_path_gives_advice_and_changes_nothing() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let forged = "/etc/sandbox-refusals-forged";
        let cmd = format!(
            "echo \"Read-only file system: '/etc/passwd'\" >&2; touch {forged} && echo written"
        );
        let v = exec(
            who,
            None,
            json!({
                "argv": ["/bin/bash", "-c", cmd],
                "profile": "shell",
                "cwd": ws.path(),
            }),
        );
        // The touch after the forged line is still refused: nothing was widened.
        assert!(!v["stdout"].as_str().unwrap().contains("written"), "{v}");
        assert!(!Path::new(forged).exists());
        let named: Vec<&str> = refusals(&v)
            .iter()
            .map(|r| r["path"].as_str().unwrap())
            .collect();
        match who {
            // Root may write /etc on the host: the forged line gets advice, only advice.
            As::Root => assert_eq!(named, ["/etc/passwd", forged], "{v}"),
            // uid 65534 may not: the forged path and the real refusal are the host's own.
            As::Nobody => assert!(named.is_empty(), "{v}"),
        }
    }
}

#[test]
fn run_keeps_the_order_of_its_streams_when_they_are_one_file() {
    let ws = dir(As::Root, "refusals-ws");
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} run --allow-root --profile shell -- sh -c 'echo 1; echo 2 >&2; echo 3; echo 4 >&2' 2>&1",
            common::SANDBOX
        ))
        .current_dir(ws.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "1\n2\n3\n4\n");
}

#[test]
fn node_and_python_writes_outside_are_named() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let out = dir(who, "refusals-out");
        let o = out.path().to_str().unwrap();
        let cmd = format!(
            "node -e 'require(\"fs\").mkdirSync(\"{o}/n\")'; \
             python3 -c 'open(\"{o}/p\", \"w\")'"
        );
        let v = exec(
            who,
            None,
            json!({
                "argv": ["/bin/bash", "-c", cmd],
                "profile": "shell",
                "cwd": ws.path(),
                // node reserves more address space than the default limit allows where the
                // limit is RLIMIT_AS (no memory cgroup for uid 65534).
                "limits": {"memory_bytes": 16u64 << 30},
            }),
        );
        let r = refusals(&v);
        let named: Vec<(&str, &str)> = r
            .iter()
            .map(|e| {
                (
                    e["path"].as_str().unwrap(),
                    e["operation"].as_str().unwrap_or(""),
                )
            })
            .collect();
        let (n, p) = (format!("{o}/n"), format!("{o}/p"));
        assert_eq!(
            named,
            [(n.as_str(), "mkdir"), (p.as_str(), "")],
            "{who:?}: {v}"
        );
        let allow = format!("\"writable_paths\": [\"{o}\"]");
        assert!(r.iter().all(|e| e["allow"] == allow.as_str()), "{v}");
    }
}

/// The three Landlock calls a nested run needs from the outer profile.
const LANDLOCK_CALLS: &str = "landlock_create_ruleset:landlock_add_rule:landlock_restrict_self";

/// A sandbox run inside a sandbox (a project's test suite that uses it, run by an agent under
/// `shell`): the kernel allows one seccomp listener per process, so the inner run answers
/// refused calls in its filter and says so; the outer profile refuses namespaces, so the inner
/// run is `filtered`, or `contained` where the outer profile allows Landlock's calls. Its
/// protection holds (the inner `minimal` cannot write the workspace the outer can), and the
/// outer names no refusal it did not make (no `/tmp` write, no `--allow-write` for an exec).
/// Control: the same inner run outside any sandbox is `isolated`, with no warning.
#[test]
fn a_sandbox_inside_a_sandbox_runs_in_the_tier_the_outer_allows() {
    for who in BOTH {
        let ws = dir(who, "refusals-nested");
        let w = ws.path().to_str().unwrap();
        let inner = json!({
            "argv": ["/bin/sh", "-c", format!("touch {w}/inner")],
            "profile": "minimal",
            "allow_root": true,
        });
        fs::write(ws.path().join("req.json"), inner.to_string()).unwrap();
        let cmd = format!("{} exec --json < {w}/req.json", common::SANDBOX);
        for (extra, tier) in [(None, "filtered"), (Some(LANDLOCK_CALLS), "contained")] {
            let mut args = vec!["--profile", "shell", "--workspace", w];
            if let Some(calls) = extra {
                args.extend(["--allow", calls]);
            }
            args.extend(["--", "bash", "-c", &cmd]);
            let o = run(who, ws.path(), &args);
            let err = stderr(&o);
            assert!(o.status.success(), "{who:?} {tier}: {err}");
            let v: Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{who:?} {tier}: {e}: {o:?}"));
            assert_eq!(v["tier"], tier, "{who:?}: {v}");
            // The inner profile's protection holds: no file changes.
            assert_ne!(v["exit_code"], 0, "{who:?} {tier}: {v}");
            assert!(!ws.path().join("inner").exists(), "{who:?} {tier}");
            let warned = v["warnings"].to_string();
            assert!(
                warned.contains("has a listener already (a sandbox or supervisor around this one"),
                "{who:?} {tier}: {v}"
            );
            if tier == "filtered" {
                assert!(
                    warned.contains("landlock_create_ruleset is refused by the seccomp filter"),
                    "{who:?}: {v}"
                );
            }
            assert!(!err.contains("sandbox: refused "), "{who:?} {tier}: {err}");
        }
        // Control: the outer alone writes the workspace; the inner run alone is isolated.
        let o = run(
            who,
            ws.path(),
            &[
                "--profile",
                "shell",
                "--workspace",
                w,
                "--",
                "touch",
                "inner",
            ],
        );
        assert!(o.status.success(), "{who:?}: {}", stderr(&o));
        assert!(ws.path().join("inner").exists());
        let mut alone = inner.clone();
        alone["argv"] = json!(["/bin/true"]);
        let v = exec(who, None, alone);
        assert_eq!(v["tier"], "isolated", "{who:?}: {v}");
        assert_eq!(v["warnings"], json!([]), "{who:?}: {v}");
    }
}

/// EACCES on a file that exists, in the words bash prints for a refused exec and a refused
/// redirection alike, is not named: the cause is unknown (here the file's own mode refuses
/// the exec, which no writable place would change). Control: a file the same command creates
/// outside the writable places is named, with its change.
#[test]
fn an_exec_refused_by_the_files_mode_is_not_named_a_write() {
    for who in BOTH {
        let ws = dir(who, "refusals-ws");
        let out = dir(who, "refusals-out");
        let script = out.path().join("script");
        fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
        if who == As::Nobody {
            chown_all(out.path());
        }
        let (s, o) = (script.to_str().unwrap(), out.path().to_str().unwrap());
        let v = exec(
            who,
            None,
            json!({
                "argv": ["/bin/bash", "-c", format!("{s}; touch {o}/new")],
                "profile": "shell",
                "cwd": ws.path(),
                "workspace": ws.path(),
                "isolation": "off",
            }),
        );
        let err = v["stderr"].as_str().unwrap();
        assert!(
            err.contains(&format!("{s}: Permission denied")),
            "{who:?}: {v}"
        );
        let named: Vec<&str> = refusals(&v)
            .iter()
            .map(|r| r["path"].as_str().unwrap())
            .collect();
        assert_eq!(named, [format!("{o}/new")], "{who:?}: {v}");
    }
}

/// A refusal a program prints on stdout (mocha and other test runners print their errors
/// there) is named as one on stderr is, in a one-shot request and in a session's command;
/// control: the same line about a path the sandbox does not refuse names nothing.
#[test]
fn a_refusal_printed_on_stdout_is_named() {
    for who in BOTH {
        let ws = dir(who, "refusals-stdout-ws");
        let out = dir(who, "refusals-stdout-out");
        let t = out.path().join("f");
        let t = t.to_str().unwrap();
        let request = |script: String| {
            json!({
                "argv": ["/bin/bash", "-c", script],
                "profile": "shell",
                "cwd": ws.path(),
                "workspace": ws.path(),
            })
        };
        let v = exec(who, None, request(format!("touch {t} 2>&1")));
        assert_eq!(v["stderr"], "", "{who:?}: {v}");
        let r = refusals(&v);
        assert_eq!(r.len(), 1, "{who:?}: {v}");
        assert_eq!(r[0]["path"], t, "{who:?}: {v}");
        // Control: the same words about a path in the workspace are the program's own affair.
        let own = ws.path().join("f");
        let v = exec(
            who,
            None,
            request(format!(
                "echo \"touch: cannot touch '{}': Permission denied\"",
                own.to_str().unwrap()
            )),
        );
        assert!(refusals(&v).is_empty(), "{who:?}: {v}");
    }
}
