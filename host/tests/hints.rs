//! Every hint works when applied. A table of refusals (filter, view, Landlock, network), each
//! run as root and as uid 65534 the way agents send it; the test takes the change the result
//! proposes (a violation's `change`, a refusal's `allow`: JSON fields, or `run`'s flags),
//! applies it to the request mechanically, and checks that the call then passes and that the
//! network mode stayed what it was, unless the change is itself the network's (a domain for
//! the proxy). The first run of each row is its control: the call is refused without the
//! change.

mod common;

use common::{output_with_input, sandbox, As, BOTH};
use serde_json::{json, Map, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// A directory `who` owns (workspace, a place outside it).
fn dir(who: As) -> tempfile::TempDir {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    if who == As::Nobody {
        let ok = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(d.path())
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
    d
}

fn exec(who: As, home: &Path, request: &Value) -> Value {
    let mut c = sandbox(who);
    c.args(["exec", "--json"]).env("HOME", home);
    let out = output_with_input(&mut c, request.to_string().as_bytes());
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// `request` with a change applied: the change is JSON fields without braces; a list is
/// appended to the request's list of the same name, anything else replaces it.
fn apply(request: &Value, change: &str) -> Value {
    let fields: Map<String, Value> = serde_json::from_str(&format!("{{{change}}}"))
        .unwrap_or_else(|e| panic!("the change `{change}` is not JSON fields: {e}"));
    let mut r = request.clone();
    for (k, v) in fields {
        match (r.get_mut(&k), v) {
            (Some(Value::Array(have)), Value::Array(more)) => have.extend(more),
            (_, v) => r[&k] = v,
        }
    }
    r
}

/// The one change the result proposes: from its violations, else from its refusals.
fn proposed(v: &Value) -> Option<String> {
    let from = |list: &str, key: &str| {
        v[list]
            .as_array()
            .and_then(|l| l.first())
            .map(|e| e[key].as_str().map(str::to_string))
    };
    match from("violations", "change") {
        Some(c) => c,
        None => from("refusals", "allow").flatten(),
    }
}

/// What a row runs and how its call is seen to pass.
struct Row {
    name: &'static str,
    /// The request's fields besides `argv` (`cwd` is added).
    fields: Value,
    argv: Vec<String>,
    /// stdout once the call passes.
    passes: &'static str,
}

fn py(code: &str) -> Vec<String> {
    vec!["/usr/bin/python3".into(), "-c".into(), code.into()]
}

fn rows(outside: &Path) -> Vec<Row> {
    let target = outside.join("f");
    vec![
        Row {
            name: "socket",
            fields: json!({}),
            argv: py(
                "import socket\ntry: socket.socket(); print('ok')\nexcept OSError as e: print(e)",
            ),
            passes: "ok\n",
        },
        Row {
            // trio's setsockopt (jinja2's tests) under shell: shell has unix sockets.
            name: "setsockopt",
            fields: json!({"profile": "shell"}),
            argv: py("import socket\na, b = socket.socketpair()\n\
                      try: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192); print('ok')\n\
                      except OSError as e: print(e)"),
            passes: "ok\n",
        },
        Row {
            name: "ptrace",
            fields: json!({}),
            argv: py(
                "import ctypes\nr = ctypes.CDLL(None, use_errno=True).ptrace(0, 0, 0, 0)\n\
                      print('ok' if r == 0 else ctypes.get_errno())",
            ),
            passes: "ok\n",
        },
        Row {
            // Past the filter, the kernel still refuses (no capability): the filter's
            // EPERM and the kernel's are told apart by the violation, which must be gone.
            name: "mount",
            fields: json!({}),
            argv: py("import ctypes\n\
                      ctypes.CDLL(None).mount(b'none', b'/tmp', b'tmpfs', 0, None)\nprint('ok')"),
            passes: "ok\n",
        },
        Row {
            name: "write outside the workspace",
            fields: json!({"profile": "shell"}),
            argv: vec!["/usr/bin/touch".into(), target.to_str().unwrap().into()],
            passes: "",
        },
        Row {
            name: "name lookup without network",
            fields: json!({"profile": "shell"}),
            argv: vec![
                "/usr/bin/curl".into(),
                "-sS".into(),
                "-o".into(),
                "/dev/null".into(),
                "--max-time".into(),
                "5".into(),
                "https://pypi.org/simple/".into(),
            ],
            passes: "",
        },
    ]
}

#[test]
fn every_proposed_change_lets_the_call_through_and_keeps_the_network() {
    for who in BOTH {
        let ws = dir(who);
        let outside = dir(who);
        let home = dir(who);
        for row in rows(outside.path()) {
            let mut request = row.fields.clone();
            request["argv"] = json!(row.argv);
            request["cwd"] = json!(ws.path());
            let at = format!("{who:?} {}", row.name);
            // Control: refused, and a change proposed.
            let v = exec(who, home.path(), &request);
            let named = |v: &Value, list: &str| v[list].as_array().is_some_and(|l| !l.is_empty());
            assert!(
                named(&v, "violations") || named(&v, "refusals"),
                "{at}: the control was not refused: {v}"
            );
            let change = proposed(&v).unwrap_or_else(|| panic!("{at}: no change: {v}"));
            let mode = v["network"]["mode"].clone();
            let changed = apply(&request, &change);
            let v = exec(who, home.path(), &changed);
            assert_eq!(v["violations"], json!([]), "{at} with {change}: {v}");
            if row.name == "name lookup without network" {
                // The change is the proxy's allowlist: the name is looked up there, and
                // nothing else of the network opens.
                assert_eq!(v["network"]["mode"], "proxy", "{at}: {v}");
                let d = &v["network"]["destinations"];
                assert!(
                    d.as_array()
                        .unwrap()
                        .iter()
                        .any(|d| d["host"] == "pypi.org" && d["allowed"] == true),
                    "{at}: {v}"
                );
                assert_eq!(v["refusals"], json!([]), "{at}: {v}");
                continue;
            }
            assert_eq!(v["stdout"], row.passes, "{at} with {change}: {v}");
            assert_eq!(v["refusals"], json!([]), "{at} with {change}: {v}");
            assert_eq!(
                v["network"]["mode"], mode,
                "{at}: {change} changed the network: {v}"
            );
        }
    }
}

#[test]
fn the_narrow_change_comes_first_and_never_opens_the_network_unsaid() {
    let ws = dir(As::Nobody);
    let home = dir(As::Nobody);
    let base = json!({"profile": "shell", "cwd": ws.path()});
    let mut trio = base.clone();
    trio["argv"] = json!(py("import socket\na, b = socket.socketpair()\n\
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)"));
    let v = exec(As::Nobody, home.path(), &trio);
    let e = &v["violations"][0];
    assert_eq!(e["syscall"], "setsockopt", "{v}");
    // A shell that got `none` by default: asking for it gives the whole group in the job's
    // own network namespace, in one run (an allow entry for the one call needed another run
    // for each next call of the group), and the network stays closed.
    assert_eq!(e["change"], "\"network\": \"none\"", "{v}");
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("own network namespace, which reaches nothing outside"),
        "{v}"
    );
    let mut asked = trio.clone();
    asked["network"] = json!("none");
    let v = exec(As::Nobody, home.path(), &asked);
    assert_eq!(v["violations"], json!([]), "{v}");
    assert_eq!(v["network"]["mode"], "none", "{v}");
    // A profile that runs no programs keeps the narrow change first; the group's profile
    // comes second, with the mode that keeps the request without network, and the hint says
    // why.
    let mut narrow = trio.clone();
    narrow["profile"] = json!("minimal");
    let v = exec(As::Nobody, home.path(), &narrow);
    let e = &v["violations"][0];
    assert_eq!(e["change"], "\"allow\": [\"setsockopt\"]", "{v}");
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.contains("\"profile\": \"network\", \"network\": \"none\"")
            && hint.contains("host's network"),
        "{v}"
    );
    // A request whose network is its own keeps it: the change adds no mode.
    let mut host = trio.clone();
    host["network"] = json!("host");
    host["profile"] = json!("minimal");
    host["argv"] = json!(py("import socket\nsocket.socket()"));
    let v = exec(As::Nobody, home.path(), &host);
    assert_eq!(
        v["violations"][0]["change"], "\"allow\": [\"socket\"]",
        "{v}"
    );
    // Control: left to the profile, the same call's change pins the mode.
    host.as_object_mut().unwrap().remove("network");
    let v = exec(As::Nobody, home.path(), &host);
    assert_eq!(
        v["violations"][0]["change"], "\"allow\": [\"socket\"], \"network\": \"none\"",
        "{v}"
    );
}

/// `sandbox run` from `cwd` with `flags` before `--` and `argv` after.
fn run(who: As, cwd: &Path, flags: &[String], argv: &[String]) -> Output {
    sandbox(who)
        .args(["run", "--allow-root"])
        .args(flags)
        .arg("--")
        .args(argv)
        .current_dir(cwd)
        .output()
        .unwrap()
}

#[test]
fn run_flags_from_a_hint_work_when_applied() {
    for who in BOTH {
        let ws = dir(who);
        let outside = dir(who);
        for row in rows(outside.path()).into_iter().take(3) {
            let at = format!("{who:?} run {}", row.name);
            let mut flags: Vec<String> = match row.fields["profile"].as_str() {
                Some(p) => vec!["--profile".into(), p.into()],
                None => Vec::new(),
            };
            let o = run(who, ws.path(), &flags, &row.argv);
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            assert_ne!(
                String::from_utf8_lossy(&o.stdout),
                row.passes,
                "{at}: {err}"
            );
            // The flags: after `add ` up to `;`, else after the line's last `: `; the note on
            // the network mode left out.
            let line = err
                .lines()
                .find(|l| l.contains("was refused"))
                .unwrap_or_else(|| panic!("{at}: no refusal named: {err}"));
            let line = line.split(" (--network none keeps").next().unwrap();
            let change = match line.split_once("to allow it add ") {
                Some((_, c)) => c.split(';').next().unwrap(),
                None => line.rsplit(": ").next().unwrap(),
            };
            if change.contains("--profile ") {
                flags.clear();
            }
            flags.extend(change.split_whitespace().map(String::from));
            let o = run(who, ws.path(), &flags, &row.argv);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                row.passes,
                "{at} with {flags:?}: {err}"
            );
            assert!(!err.contains("refused"), "{at} with {flags:?}: {err}");
        }
    }
}

/// Looks `pypi.org` up three times, as pip does when it retries.
const LOOKUPS: &str = "import socket, sys\nfor i in range(3):\n    try:\n        \
socket.getaddrinfo('pypi.org', 443); print('resolved')\n    except OSError as e:\n        \
print('pip: retrying:', e, file=sys.stderr)";

#[test]
fn a_lookup_without_network_is_said_once_under_the_default_request() {
    for who in BOTH {
        let ws = dir(who);
        let home = dir(who);
        let curl = [
            "/usr/bin/curl",
            "-sS",
            "--max-time",
            "5",
            "https://pypi.org",
        ];
        for argv in [py(LOOKUPS), curl.iter().map(|s| s.to_string()).collect()] {
            let at = format!("{who:?} {}", argv[0]);
            let request = json!({"argv": argv, "cwd": ws.path()});
            let v = exec(who, home.path(), &request);
            assert_eq!(v["network"]["mode"], "none", "{at}: {v}");
            let r = v["refusals"].as_array().unwrap();
            assert_eq!(r.len(), 1, "{at}: said once: {v}");
            assert_eq!(
                r[0]["rule"], "no network: profile minimal has none",
                "{at}: {v}"
            );
            assert!(
                r[0]["allow"]
                    .as_str()
                    .unwrap()
                    .starts_with("\"allow_domains\": ["),
                "{at}: {v}"
            );
            // Control: with the host's network (where this machine resolves the name) the
            // same program is not told about the network.
            let mut host = request.clone();
            host["profile"] = json!("network");
            host["network"] = json!("host");
            let v = exec(who, home.path(), &host);
            assert_eq!(v["refusals"], json!([]), "{at} with the network: {v}");
            // `sandbox run`: one stderr line after the program's own.
            let o = run(who, ws.path(), &[], &argv);
            let err = String::from_utf8_lossy(&o.stderr);
            let said: Vec<&str> = err
                .lines()
                .filter(|l| l.starts_with("sandbox: refused"))
                .collect();
            assert_eq!(said.len(), 1, "{at}: {err}");
            assert!(
                said[0].contains("no network: profile minimal has none; to allow: --allow-domain "),
                "{at}: {err}"
            );
        }
    }
}
