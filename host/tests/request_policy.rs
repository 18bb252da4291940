//! The per-request policy fields (`allow`, `deny`, `profile_file`) as agents send them: through
//! `exec --json` and `serve`, as root and as uid 65534, from a project directory of their own.
//! Each change is shown to allow (or take away) the call it names, against a control without
//! it; hostile values are refused by name and no error quotes a file the program may not read.

mod common;

use common::{output_with_input, sandbox, As, BOTH};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// How the request reaches the engine.
#[derive(Clone, Copy, Debug)]
enum Front {
    Exec,
    Serve,
}

const FRONTS: [Front; 2] = [Front::Exec, Front::Serve];

/// Prints `made` when python3 may create a socket, `denied` when the call is refused.
const SOCKET: &str =
    "import socket\ntry: socket.socket(); print('made')\nexcept PermissionError: print('denied')";

/// A directory every user may enter and read (the tests' project and homes).
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `base` with the fields of `extra` set.
fn with(base: &Value, extra: &Value) -> Value {
    let mut r = base.clone();
    for (k, v) in extra.as_object().unwrap() {
        r[k] = v.clone();
    }
    r
}

/// Runs `reqs` through `front` as `who` from `dir` with `HOME` at `home`; the answers in the
/// order of the requests (serve's are matched by id, which is then removed).
fn run_all(front: Front, who: As, dir: &Path, home: &Path, reqs: &[Value]) -> Vec<Value> {
    let cmd = || {
        let mut c = sandbox(who);
        c.current_dir(dir).env("HOME", home);
        c
    };
    match front {
        Front::Exec => reqs
            .iter()
            .map(|r| {
                let out =
                    output_with_input(cmd().args(["exec", "--json"]), r.to_string().as_bytes());
                let text = String::from_utf8_lossy(&out.stdout);
                serde_json::from_str(text.trim())
                    .unwrap_or_else(|e| panic!("{who:?} {r}: not JSON ({e}): {text}"))
            })
            .collect(),
        Front::Serve => {
            let mut input = String::new();
            for (i, r) in reqs.iter().enumerate() {
                input += &with(r, &json!({"id": format!("r{i}")})).to_string();
                input.push('\n');
            }
            let out = output_with_input(cmd().arg("serve"), input.as_bytes());
            let mut answers: Vec<Option<Value>> = vec![None; reqs.len()];
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let mut v: Value = serde_json::from_str(line).unwrap();
                let id = v["id"].as_str().expect("an id").to_string();
                let i: usize = id[1..].parse().unwrap();
                v.as_object_mut().unwrap().remove("id");
                answers[i] = Some(v);
            }
            answers
                .into_iter()
                .enumerate()
                .map(|(i, a)| a.unwrap_or_else(|| panic!("{who:?}: no answer to {}", reqs[i])))
                .collect()
        }
    }
}

#[test]
fn allow_deny_and_profile_file_change_the_profile_for_every_caller_and_front_end() {
    let dir = open_dir();
    let file = dir.path().join("sock.toml");
    std::fs::write(
        &file,
        "description = \"minimal with sockets\"\n\
         allow = [\"@base\", \"@fd-io\", \"@fs-read\", \"@threads\", \"socket\"]\n",
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let base = json!({"argv": ["/usr/bin/python3", "-c", SOCKET], "timeout_s": 60});
    let cases = [
        // Control: minimal refuses socket, and names it.
        (json!({}), "denied"),
        (json!({"allow": ["socket"]}), "made"),
        // Control for deny: the network profile has socket.
        (json!({"profile": "network", "network": "none"}), "made"),
        (
            json!({"profile": "network", "network": "none", "deny": ["socket"]}),
            "denied",
        ),
        (json!({"profile_file": file}), "made"),
    ];
    let reqs: Vec<Value> = cases.iter().map(|(e, _)| with(&base, e)).collect();
    let home = open_dir();
    for who in BOTH {
        for front in FRONTS {
            let answers = run_all(front, who, dir.path(), home.path(), &reqs);
            for ((extra, want), v) in cases.iter().zip(&answers) {
                let at = format!("{who:?} {front:?} {extra}");
                assert_eq!(v["stdout"], format!("{want}\n"), "{at}: {v}");
                if *want == "denied" {
                    assert_eq!(v["violations"][0]["syscall"], "socket", "{at}: {v}");
                } else {
                    assert_eq!(v["violations"], json!([]), "{at}: {v}");
                }
            }
        }
    }
}

#[test]
fn a_changed_profile_without_namespaces_is_refused_by_name_for_an_unprivileged_caller() {
    let dir = open_dir();
    let req = json!({"argv": ["/usr/bin/python3", "-c", SOCKET], "allow": ["socket"],
        "isolation": "off"});
    for who in BOTH {
        let v = &run_all(
            Front::Exec,
            who,
            dir.path(),
            Path::new("/"),
            std::slice::from_ref(&req),
        )[0];
        match who {
            // Root takes the listener of any child.
            As::Root => assert_eq!(v["stdout"], "made\n", "{v}"),
            // The child shares the non-dumpable host's memory: its listener cannot be taken.
            As::Nobody => {
                assert_eq!(v["error"]["field"], "allow", "{v}");
                let reason = v["error"]["reason"].as_str().unwrap();
                assert!(reason.contains("isolated tier"), "{v}");
                assert!(!reason.contains("os error"), "{v}");
            }
        }
    }
}

#[test]
fn hostile_policy_values_are_refused_by_name_and_quote_no_hidden_file() {
    let dir = open_dir();
    let home = open_dir();
    let p = |name: &str| dir.path().join(name);
    // A value the parser quotes back: in a file the program may read (the control), and in a
    // credential store of the list, directly and through a link.
    let leaky = "description = \"d\"\ndefault_action = \"hidden-4242-value\"\nallow = [\"read\"]\n";
    std::fs::write(p("readable.toml"), leaky).unwrap();
    let netrc = home.path().join(".netrc");
    std::fs::write(&netrc, leaky).unwrap();
    for f in [p("readable.toml"), netrc.clone()] {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::os::unix::fs::symlink(&netrc, p("netrc-link.toml")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", p("shadow-link.toml")).unwrap();
    std::fs::create_dir(p("dir.toml")).unwrap();
    let fifo = std::ffi::CString::new(p("fifo.toml").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path in the test's own directory.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
    std::fs::write(p("unreadable.toml"), "description = \"x\"\n").unwrap();
    std::fs::set_permissions(p("unreadable.toml"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let many: Vec<String> = vec!["socket".into(); 100_000];
    let s = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"allow": ["nosuchcall"]}), "allow[0]"),
        (json!({"allow": ["socket", "@nosuchgroup"]}), "allow[1]"),
        (json!({"deny": ["read\u{0}"]}), "deny[0]"),
        (json!({"allow": ["socket\nptrace"]}), "allow[0]"),
        (json!({"allow": [""]}), "allow[0]"),
        (json!({"allow": many}), "allow"),
        (json!({"deny": many}), "deny"),
        (json!({"profile_file": "sock.toml"}), "profile_file"),
        (json!({"profile_file": ""}), "profile_file"),
        (json!({"profile_file": "/tmp/a\u{0}b"}), "profile_file"),
        (json!({"profile_file": s(p("dir.toml"))}), "profile_file"),
        (json!({"profile_file": s(p("fifo.toml"))}), "profile_file"),
        (json!({"profile_file": "/dev/zero"}), "profile_file"),
        (json!({"profile_file": s(netrc.clone())}), "profile_file"),
        (
            json!({"profile_file": s(p("netrc-link.toml"))}),
            "profile_file",
        ),
        (
            json!({"profile_file": s(p("shadow-link.toml"))}),
            "profile_file",
        ),
        (
            json!({"profile_file": s(p("unreadable.toml"))}),
            "profile_file",
        ),
        // The control: the same text where the program may read it is quoted back.
        (
            json!({"profile_file": s(p("readable.toml"))}),
            "profile_file",
        ),
    ];
    let base = json!({"argv": ["/bin/true"]});
    let reqs: Vec<Value> = cases.iter().map(|(e, _)| with(&base, e)).collect();
    for who in BOTH {
        for front in FRONTS {
            let answers = run_all(front, who, dir.path(), home.path(), &reqs);
            for ((extra, field), v) in cases.iter().zip(&answers) {
                let at = format!(
                    "{who:?} {front:?} {}",
                    extra.to_string().get(..120).unwrap_or(&extra.to_string())
                );
                if who == As::Root && extra["profile_file"] == s(p("unreadable.toml")) {
                    // Root reads any file: this one parses.
                    assert!(v["error"].is_null(), "{at}: {v}");
                    continue;
                }
                assert_eq!(v["error"]["field"], *field, "{at}: {v}");
                let reason = v["error"]["reason"].as_str().unwrap();
                let control = extra["profile_file"] == s(p("readable.toml"));
                assert_eq!(reason.contains("hidden-4242"), control, "{at}: {v}");
                assert!(!reason.contains("$6$"), "{at}: {v}");
            }
        }
    }
}

#[test]
fn timeout_s_reaches_a_day_and_hostile_values_are_refused() {
    let dir = open_dir();
    let sleep = json!({"argv": ["/bin/sleep", "2"]});
    let ok = [
        // Control: a limit below the run's length ends it.
        (json!({"timeout_s": 1}), true),
        // Above the old ceiling of 600 seconds, and the boundary itself.
        (json!({"timeout_s": 601}), false),
        (json!({"timeout_s": 3600.5}), false),
        (json!({"timeout_s": 86400}), false),
        // null is the default (a minute), as for every optional field.
        (json!({"timeout_s": null}), false),
    ];
    let bad = [
        json!({"timeout_s": 86400.001}),
        json!({"timeout_s": 86401}),
        json!({"timeout_s": 0.999}),
        json!({"timeout_s": 0}),
        json!({"timeout_s": -1}),
        json!({"timeout_s": 1e300}),
        json!({"timeout_s": -1e300}),
        json!({"timeout_s": "NaN"}),
        json!({"timeout_s": "3600"}),
        json!({"timeout_s": true}),
        json!({"timeout_s": [60]}),
    ];
    let mut reqs: Vec<Value> = ok.iter().map(|(e, _)| with(&sleep, e)).collect();
    reqs.extend(bad.iter().map(|e| with(&json!({"argv": ["/bin/true"]}), e)));
    for who in BOTH {
        for front in FRONTS {
            let answers = run_all(front, who, dir.path(), Path::new("/"), &reqs);
            for ((extra, timed_out), v) in ok.iter().zip(&answers) {
                assert_eq!(v["timed_out"], *timed_out, "{who:?} {front:?} {extra}: {v}");
            }
            for (extra, v) in bad.iter().zip(&answers[ok.len()..]) {
                assert_eq!(
                    v["error"]["field"], "timeout_s",
                    "{who:?} {front:?} {extra}: {v}"
                );
            }
        }
    }
    // `sandbox run --timeout`: the same bounds, whole seconds.
    for who in BOTH {
        for (t, status) in [
            ("1", 124),
            ("601", 0),
            ("86400", 0),
            ("0", 125),
            ("86401", 125),
            ("18446744073709551615", 125),
            ("-1", 2),
            ("1.5", 2),
            ("", 2),
            ("soon", 2),
        ] {
            let out = sandbox(who)
                .current_dir(dir.path())
                .args(["run", "--timeout", t, "--", "/bin/sleep", "2"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(status),
                "{who:?} --timeout {t}: {err}"
            );
            if status == 125 {
                assert_eq!(
                    err.trim(),
                    format!("sandbox: --timeout: must be between 1 and 86400 seconds, got {t}")
                );
            }
        }
    }
}
