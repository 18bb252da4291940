//! Network modes through the built `sandbox` binary, as agents run it (bare environment, no
//! terminal, stdin from /dev/null): `none` cannot reach a listener on the host's loopback
//! (control: `host` can), `--allow-host-port` opens exactly one port, `proxy` reaches an
//! allowed name over HTTP and CONNECT and refuses another with nothing arriving at its
//! listener, and hostile values are refused with 125 or a JSON error naming the field. The
//! protection tests run as root and as an unprivileged user.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{As, BOTH};

/// A loopback HTTP listener on the host that counts connections and answers `reached`.
struct Listener {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Listener {
    fn start() -> Listener {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                h.fetch_add(1, Ordering::SeqCst);
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = s.read(&mut [0u8; 4096]);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nreached\n",
                );
            }
        });
        Listener { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Who the protection tests run as: root passes permission checks, so each also runs as an
/// unprivileged user.
const WHO: [As; 2] = BOTH;

fn sandbox(who: As, args: &[&str]) -> Output {
    common::sandbox(who)
        .env("HOME", "/nonexistent")
        .current_dir("/tmp")
        .arg(args[0])
        .arg("--allow-root")
        .args(&args[1..])
        .output()
        .unwrap()
}

/// `sandbox run ARGS -- curl URL`: (exit status, stdout, stderr).
fn curl(who: As, args: &[&str], url: &str) -> (i32, String, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "curl", "-sS", "--max-time", "10", url]);
    let out = sandbox(who, &all);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn none_cannot_reach_the_hosts_loopback_and_host_can() {
    for who in WHO {
        let l = Listener::start();
        let url = format!("http://127.0.0.1:{}/", l.port);
        let (code, out, err) = curl(who, &["--profile", "network"], &url);
        assert_eq!(
            (code, out.as_str()),
            (0, "reached\n"),
            "{who:?} control: {err}"
        );
        let before = l.hits();
        let (code, out, err) = curl(who, &["--profile", "network", "--network", "none"], &url);
        assert_eq!(code, 7, "{who:?}: curl should fail to connect: {out}{err}");
        assert_eq!(l.hits(), before, "{who:?}: a connection arrived");
    }
}

/// The shell-network profile: a shell command that uses the network works, through `sandbox
/// run` and `sandbox exec --json`, with the host's network (its default mode); control: under
/// `shell` the same command reaches nothing.
#[test]
fn shell_network_runs_a_shells_curl_and_shell_does_not() {
    for who in WHO {
        let l = Listener::start();
        let script = format!("curl -sS --max-time 10 http://127.0.0.1:{}/", l.port);
        let run = |profile: &str| {
            sandbox(
                who,
                &["run", "--profile", profile, "--", "bash", "-c", &script],
            )
        };
        let o = run("shell-network");
        assert_eq!(
            (o.status.code(), String::from_utf8_lossy(&o.stdout).as_ref()),
            (Some(0), "reached\n"),
            "{who:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(l.hits(), 1);
        let o = run("shell");
        assert_ne!(o.status.code(), Some(0), "{who:?} control");
        assert_eq!(l.hits(), 1, "{who:?}: a connection arrived under shell");
        for (profile, works) in [("shell-network", true), ("shell", false)] {
            let before = l.hits();
            let req = serde_json::json!({"argv": ["/bin/bash", "-c", &script], "profile": profile});
            let r = exec_json_as(who, &req.to_string());
            if works {
                assert_eq!(r["exit_code"], 0, "{who:?}: {r}");
                assert_eq!(r["stdout"], "reached\n", "{who:?}: {r}");
                assert_eq!(r["network"]["mode"], "host", "{who:?}: {r}");
                assert_eq!(l.hits(), before + 1);
            } else {
                assert_ne!(r["exit_code"], 0, "{who:?} control: {r}");
                assert_eq!(
                    l.hits(),
                    before,
                    "{who:?}: a connection arrived under shell"
                );
            }
        }
    }
}

/// Names of this process's spawner threads (`sandbox-spawn-PROFILE`, cut at 15 bytes).
fn spawner_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with("sandbox-spawn-"))
        .collect()
}

/// The network namespace's plumbing (loopback brought up by the init, a host port's listener
/// made inside and handed to the host) works the same when the profile's spawner thread clones
/// the job (`exec --json`, `serve`: the thread holds the filter, and every call the init makes
/// carries the spawner's secret) as when the child attaches the filter itself (one-shot).
/// Control: with the host's network the closed port is reachable.
#[test]
fn network_namespaces_through_the_spawner_thread_and_without_it() {
    use sandbox_host::exec::{exec_with, Request, RunOptions, StartFrom};
    use sandbox_host::network::Mode;
    let open = Listener::start();
    let closed = Listener::start();
    let curl = |port: u16, mode: Mode, spawner: bool| {
        let url = format!("http://127.0.0.1:{port}/");
        let mut r = Request::new(["/usr/bin/curl", "-sS", "--max-time", "10", url.as_str()]);
        r.profile = "network".into();
        r.network = Some(mode);
        if mode == Mode::None {
            r.host_ports = vec![open.port];
        }
        let opts = RunOptions {
            start: if spawner {
                StartFrom::SpawnerThread
            } else {
                StartFrom::CallingThread
            },
            ..RunOptions::default()
        };
        exec_with(&r, &opts).unwrap()
    };
    // The one-shot way first: no spawner thread may exist before the other way runs.
    for spawner in [false, true] {
        let res = curl(open.port, Mode::None, spawner);
        assert_eq!(
            (res.exit_code, res.stdout.as_str()),
            (Some(0), "reached\n"),
            "spawner {spawner}: {res:?}"
        );
        let n = &res.network;
        assert_eq!(
            (n.mode, n.host_ports.as_slice()),
            (Mode::None, &[open.port][..])
        );
        let res = curl(closed.port, Mode::None, spawner);
        assert_eq!(res.exit_code, Some(7), "spawner {spawner}: {res:?}");
        assert_eq!(closed.hits(), 0, "spawner {spawner}: a connection arrived");
        let threads = spawner_threads();
        assert_eq!(
            threads.iter().any(|t| t.starts_with("sandbox-spawn-n")),
            spawner,
            "spawner {spawner}: {threads:?}"
        );
    }
    // Control: the host's network reaches the port the namespace kept closed.
    for spawner in [false, true] {
        let res = curl(closed.port, Mode::Host, spawner);
        assert_eq!(res.stdout, "reached\n", "spawner {spawner}: {res:?}");
    }
    assert_eq!(open.hits(), 2);
    assert_eq!(closed.hits(), 2);
}

#[test]
fn a_host_port_opens_that_port_only() {
    let open = Listener::start();
    let closed = Listener::start();
    let port = open.port.to_string();
    let args = [
        "--profile",
        "network",
        "--network",
        "none",
        "--allow-host-port",
        &port,
    ];
    let (code, out, err) = curl(WHO[0], &args, &format!("http://127.0.0.1:{}/", open.port));
    assert_eq!((code, out.as_str()), (0, "reached\n"), "{err}");
    let (code, _, _) = curl(WHO[0], &args, &format!("http://127.0.0.1:{}/", closed.port));
    assert_eq!(code, 7);
    assert_eq!(closed.hits(), 0);
}

#[test]
fn proxy_reaches_allowed_names_and_refuses_others_with_nothing_arriving() {
    for who in WHO {
        let l = Listener::start();
        let api = format!("api.test:{}:127.0.0.1", l.port);
        let evil = format!("evil.test:{}:127.0.0.1", l.port);
        let args = [
            "--allow-domain",
            "api.test",
            "--resolve",
            &api,
            "--resolve",
            &evil,
        ];
        // Plain HTTP, forwarded (under the default minimal profile: proxy mode lets the
        // program open the socket it needs; the namespace is the boundary).
        let (code, out, err) = curl(who, &args, &format!("http://api.test:{}/", l.port));
        assert_eq!((code, out.as_str()), (0, "reached\n"), "{who:?}: {err}");
        // CONNECT (curl tunnels with -p / --proxytunnel), then HTTP inside the tunnel.
        let mut all = vec!["run"];
        all.extend_from_slice(&args);
        let url = format!("http://api.test:{}/", l.port);
        all.extend_from_slice(&["--", "curl", "-sS", "-p", "--max-time", "10", &url]);
        let out = sandbox(who, &all);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "reached\n", "{who:?}");
        assert_eq!(l.hits(), 2);
        // Another name pointing at the same listener: 403, and nothing arrives.
        let (code, out, err) = curl(who, &args, &format!("http://evil.test:{}/", l.port));
        assert_eq!(code, 0);
        assert!(out.contains("add --allow-domain evil.test"), "{out}");
        assert!(err.contains("the proxy refused evil.test"), "{err}");
        // The host's loopback directly, bypassing the proxy: unreachable.
        let (code, _, _) = curl(who, &args, &format!("http://127.0.0.1:{}/", l.port));
        assert_eq!(code, 7);
        assert_eq!(l.hits(), 2, "{who:?}: a refused request arrived");
    }
}

/// `sandbox run ... -- bash -c SCRIPT`: (exit status, stdout, stderr).
fn run_script(who: As, args: &[&str], script: &str) -> (i32, String, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "bash", "-c", script]);
    let out = sandbox(who, &all);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A pin names its port: `localhost` pinned to 127.0.0.1 on the port of one loopback server
/// reaches it through the proxy (curl, forwarded and tunnelled, and python3), and the same
/// name on the port of another loopback server (what a database or the caller's own server
/// would be) is refused, named on stderr with the exact pin for that port, with nothing
/// arriving. Control: pinned for that port as well, the same requests reach the other server
/// (the old `NAME:ADDR`, which pinned every port, is refused now; the unit test
/// `a_port_pin_closes_what_an_every_port_pin_opened` shows what it opened). Curl's
/// `--noproxy` overrides, and python3 drops, `NO_PROXY`, which names `localhost` so that host
/// ports are reached directly.
#[test]
fn a_pinned_name_reaches_its_port_and_not_another_loopback_port() {
    for who in WHO {
        let open = Listener::start();
        let other = Listener::start();
        let (p, q) = (open.port, other.port);
        let pin_p = format!("localhost:{p}:127.0.0.1");
        let pin_q = format!("localhost:{q}:127.0.0.1");
        let one = [
            "--profile",
            "shell",
            "--allow-domain",
            "localhost",
            "--resolve",
            &pin_p,
        ];
        let script = |port: u16| {
            format!(
                "curl -sS --max-time 10 --noproxy '' http://localhost:{port}/; \
                 curl -sS --max-time 10 --noproxy '' -p http://localhost:{port}/; \
                 python3 -c \"import os; os.environ.pop('no_proxy'); os.environ.pop('NO_PROXY')
import urllib.request, urllib.error
try:
    print(urllib.request.urlopen('http://localhost:{port}/').read().decode(), end='')
except urllib.error.HTTPError as e:
    print('python', e.code)\""
            )
        };
        let (code, out, err) = run_script(who, &one, &script(p));
        assert_eq!(
            (code, out.as_str()),
            (0, "reached\nreached\nreached\n"),
            "{who:?}: {err}"
        );
        assert_eq!(open.hits(), 3, "{who:?}");
        let (_, out, err) = run_script(who, &one, &script(q));
        assert!(
            out.contains(&format!("--resolve localhost:{q}:127.0.0.1"))
                && out.contains(&format!("pinned for port {p} only"))
                && out.ends_with("python 403\n")
                && !out.contains("reached"),
            "{who:?}: {out}"
        );
        assert!(
            err.contains("CONNECT tunnel failed, response 403"),
            "{who:?}: {err}"
        );
        assert!(
            err.contains(&format!(
                "the proxy refused localhost:{q} (resolves to 127.0.0.1 (loopback) (pinned for port {p} only)); if intended, pin it for this port with --resolve localhost:{q}:127.0.0.1"
            )),
            "{who:?}: {err}"
        );
        assert_eq!(
            other.hits(),
            0,
            "{who:?}: a request on another port arrived"
        );
        // Control: pinned for that port too, the same requests reach the other server.
        let both = [
            "--profile",
            "shell",
            "--allow-domain",
            "localhost",
            "--resolve",
            &pin_p,
            "--resolve",
            &pin_q,
        ];
        let (code, out, err) = run_script(who, &both, &script(q));
        assert_eq!(
            (code, out.as_str()),
            (0, "reached\nreached\nreached\n"),
            "{who:?} control: {err}"
        );
        assert_eq!(other.hits(), 3, "{who:?}");
        // The old form, which opened every port, is refused and names the new one.
        let old = [
            "--allow-domain",
            "localhost",
            "--resolve",
            "localhost:127.0.0.1",
        ];
        let (code, _, err) = run_script(who, &old, "exit 0");
        assert_eq!(code, 125, "{who:?}: {err}");
        assert!(
            err.contains("--resolve") && err.contains("NAME:PORT:ADDR") && err.contains("loopback"),
            "{who:?}: {err}"
        );
        // The same through exec --json.
        let req = |resolve: serde_json::Value, port: u16| {
            serde_json::json!({
                "argv": ["/usr/bin/curl", "-sS", "--max-time", "10", "--noproxy", "none.invalid",
                         format!("http://localhost:{port}/")],
                "allow_domains": ["localhost"],
                "resolve": resolve,
            })
            .to_string()
        };
        let mut pins = serde_json::Map::new();
        pins.insert(format!("localhost:{p}"), "127.0.0.1".into());
        let r = exec_json_as(who, &req(pins.clone().into(), p));
        assert_eq!(r["stdout"], "reached\n", "{who:?}: {r}");
        let r = exec_json_as(who, &req(pins.into(), q));
        let want = format!("\"resolve\": {{\"localhost:{q}\": \"127.0.0.1\"}}");
        assert!(
            r["stdout"].as_str().unwrap().contains(&want),
            "{who:?}: {r}"
        );
        let d = &r["network"]["destinations"][0];
        assert_eq!(
            (d["port"].as_u64(), d["allowed"].as_bool()),
            (Some(q as u64), Some(false)),
            "{r}"
        );
        assert_eq!(
            other.hits(),
            3,
            "{who:?}: a request on another port arrived"
        );
        let r = exec_json_as(who, &req(serde_json::json!({"localhost": "127.0.0.1"}), q));
        assert_eq!(r["error"]["field"], "resolve.localhost", "{who:?}: {r}");
        assert!(
            r["error"]["reason"]
                .as_str()
                .unwrap()
                .contains("\"NAME:PORT\""),
            "{r}"
        );
    }
}

#[test]
fn exec_json_reports_every_destination_and_names_fields() {
    let l = Listener::start();
    let req = serde_json::json!({
        "argv": ["/usr/bin/curl", "-sS", "--max-time", "10", format!("http://api.test:{}/", l.port),
                 format!("http://pkg.test:{}/", l.port)],
        "allow_domains": ["api.test"],
        "resolve": {format!("api.test:{}", l.port): "127.0.0.1", format!("pkg.test:{}", l.port): "127.0.0.1"},
    });
    let r = exec_json(&req.to_string());
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        r["stdout"]
            .as_str()
            .unwrap()
            .contains("add \"pkg.test\" to allow_domains"),
        "{r}"
    );
    let n = &r["network"];
    assert_eq!(n["mode"], "proxy");
    assert_eq!(n["proxy"], "127.0.0.1:3128");
    let d = n["destinations"].as_array().unwrap();
    assert_eq!(d.len(), 2, "{n}");
    assert_eq!(
        (d[0]["host"].as_str(), d[0]["allowed"].as_bool()),
        (Some("api.test"), Some(true))
    );
    assert_eq!(
        (d[1]["host"].as_str(), d[1]["allowed"].as_bool()),
        (Some("pkg.test"), Some(false))
    );
    assert_eq!(l.hits(), 1);
    for (bad, field) in [
        (
            r#""allow_domains": ["ok.test", "bad..test"]"#,
            "allow_domains[1]",
        ),
        (r#""allow_domains": ["*"]"#, "allow_domains[0]"),
        (r#""allow_domains": "a.test""#, "allow_domains"),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test": "localhost"}"#,
            "resolve.a.test",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": ["a.test:1.2.3.4"]"#,
            "resolve",
        ),
        (r#""network": "vpn""#, "network"),
        (
            r#""network": "host", "allow_domains": ["a.test"]"#,
            "allow_domains",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test": "127.0.0.1"}"#,
            "resolve.a.test",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test:0": "127.0.0.1"}"#,
            "resolve.a.test:0",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test:65536": "127.0.0.1"}"#,
            "resolve.a.test:65536",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test:80": "127.0.0.1\n"}"#,
            "resolve.a.test:80",
        ),
        (
            r#""allow_domains": ["a.test"], "resolve": {"a.test:80": "127.0.0.1", "A.test:80": "::1"}"#,
            "resolve.a.test:80",
        ),
        (r#""host_ports": [0]"#, "host_ports"),
        (r#""host_ports": [70000]"#, "host_ports"),
    ] {
        let r = exec_json(&format!(r#"{{"argv": ["/bin/true"], {bad}}}"#));
        assert_eq!(r["error"]["field"], field, "{bad}: {r}");
    }
}

#[test]
fn hostile_flags_exit_125_naming_the_flag() {
    for (args, flag) in [
        (vec!["--allow-domain", "exa mple.com"], "--allow-domain"),
        (vec!["--allow-domain", "*.com"], "--allow-domain"),
        (
            vec!["--allow-domain", "a.test", "--resolve", "a.test"],
            "--resolve",
        ),
        (
            vec!["--allow-domain", "a.test", "--resolve", "a.test:999.1.1.1"],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:0:127.0.0.1",
            ],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:65536:127.0.0.1",
            ],
            "--resolve",
        ),
        (
            vec!["--allow-domain", "a.test", "--resolve", "a.test:80:"],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:80: 127.0.0.1",
            ],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:80:127.0.0.1\n",
            ],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:443:2001:db8::1",
            ],
            "--resolve",
        ),
        (
            vec!["--allow-domain", "a.test", "--resolve", "a.test:10.0.0.1"],
            "--resolve",
        ),
        (
            vec![
                "--allow-domain",
                "a.test",
                "--resolve",
                "a.test:80:127.0.0.1",
                "--resolve",
                "a.test:80:127.0.0.2",
            ],
            "--resolve",
        ),
        (
            vec!["--network", "host", "--allow-host-port", "80"],
            "--allow-host-port",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["--", "/bin/true"]);
        let out = sandbox(As::Root, &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(if flag == "--network" { 2 } else { 125 }),
            "{args:?}: {err}"
        );
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // One pin over the limit: refused, naming the limit; at the limit: runs.
    let pins: Vec<String> = (1..=257).map(|p| format!("a.test:{p}:127.0.0.1")).collect();
    for (n, code) in [(257, 125), (256, 0)] {
        let mut all = vec!["run", "--allow-domain", "a.test"];
        for p in &pins[..n] {
            all.extend_from_slice(&["--resolve", p]);
        }
        all.extend_from_slice(&["--", "/bin/true"]);
        let out = sandbox(As::Root, &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{n} pins: {err}");
        assert_eq!(
            err.contains("--resolve") && err.contains("at most 256"),
            code != 0,
            "{err}"
        );
    }
}

fn exec_json(request: &str) -> Value {
    exec_json_as(As::Root, request)
}

fn exec_json_as(who: As, request: &str) -> Value {
    let out = common::output_with_input(
        common::sandbox(who)
            .args(["exec", "--json"])
            .current_dir("/tmp")
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent")
            .stderr(Stdio::null()),
        request.as_bytes(),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A destination the proxy refused is an entry of `refusals` (destination, `connect`, the
/// proxy's reason, the change that allows it), as root and as uid 65534, and `sandbox run`
/// says it on one stderr line; applying the change lets the request through (control), and
/// then nothing is refused. A failed lookup under a profile without network is still named
/// from the program's words.
#[test]
fn a_proxy_refusal_is_named_in_refusals_and_its_change_works() {
    for who in WHO {
        let l = Listener::start();
        let req = |allow: &[&str]| {
            serde_json::json!({
                "argv": ["/usr/bin/curl", "-sS", "--max-time", "10",
                         format!("http://pkg.test:{}/", l.port)],
                "allow_domains": allow,
                "resolve": {format!("pkg.test:{}", l.port): "127.0.0.1"},
            })
            .to_string()
        };
        let r = exec_json_as(who, &req(&["api.test"]));
        let refusals = r["refusals"].as_array().unwrap();
        assert_eq!(refusals.len(), 1, "{who:?}: {r}");
        let e = &refusals[0];
        assert_eq!(e["destination"], "pkg.test", "{r}");
        assert_eq!(e["operation"], "connect", "{r}");
        assert_eq!(
            e["rule"],
            format!(
                "the proxy refused it: not in the allowed domains (port {})",
                l.port
            ),
            "{r}"
        );
        assert_eq!(e["allow"], "\"allow_domains\": [\"pkg.test\"]", "{r}");
        assert_eq!(l.hits(), 0, "{who:?}: a refused request arrived");
        // Control: the change applied, the request arrives and nothing is refused.
        let r = exec_json_as(who, &req(&["api.test", "pkg.test"]));
        assert_eq!(r["stdout"], "reached\n", "{who:?}: {r}");
        assert_eq!(r["refusals"], serde_json::json!([]), "{r}");
        assert_eq!(l.hits(), 1);
        // `sandbox run`: one line naming the destination and the flag, not two.
        let pin = format!("pkg.test:{}:127.0.0.1", l.port);
        let url = format!("http://pkg.test:{}/", l.port);
        let args = ["--allow-domain", "api.test", "--resolve", &pin];
        let (_, _, err) = curl(who, &args, &url);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("pkg.test")).collect();
        assert_eq!(lines.len(), 1, "{who:?}: {err}");
        assert!(lines[0].contains("add --allow-domain pkg.test"), "{err}");
        // A failed lookup without network, named as before.
        let r = exec_json_as(
            who,
            r#"{"argv": ["/usr/bin/curl", "-sS", "http://pkg.test/"], "profile": "shell"}"#,
        );
        let e = &r["refusals"][0];
        assert_eq!(e["rule"], "no network: profile shell has none", "{r}");
        assert_eq!(e["allow"], "\"allow_domains\": [\"pkg.test\"]", "{r}");
    }
}

/// A test suite's local servers under the documented test request (`shell` with `none`
/// asked for): a TCP server on the job's loopback answered over IPv4 and IPv6, a UDP echo, and
/// a `multiprocessing` manager (a unix socket), as root and as uid 65534, through `sandbox run`
/// and `exec --json`. Controls: the same script with the mode left to the profile is refused,
/// and the hint's one change (`--network none`, `"network": "none"`) applied once runs it;
/// the host's own loopback server is not reached from inside.
#[test]
fn a_shells_own_loopback_servers_work_under_none_asked_for() {
    let script = r#"
import http.server, multiprocessing, socket, threading, urllib.request
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    class Server(http.server.HTTPServer):
        address_family = family
    s = Server((host, 0), Quiet)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    url = "http://%s:%d/" % (host if family == socket.AF_INET else "[::1]", s.server_address[1])
    assert urllib.request.urlopen(url, timeout=5).status == 200
    s.shutdown()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.sendto(b"ping", u.getsockname())
assert u.recv(4) == b"ping"
with multiprocessing.Manager() as m:
    d = m.dict(); d["k"] = 1; assert d["k"] == 1
print("ok")
"#;
    let host = Listener::start();
    let reach_host = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {}), 5)\n    print('reached')\nexcept OSError as e:\n    print('refused', e.errno)\n",
        host.port
    );
    for who in WHO {
        let run = |args: &[&str], code: &str| {
            let mut all = vec!["run", "--profile", "shell"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--", "python3", "-c", code]);
            let o = sandbox(who, &all);
            (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        // Control: the mode left to the profile (`none` by default in the namespace layer)
        // keeps the profile's refusals, and the hint names the one change.
        let (code, out, err) = run(&[], script);
        assert_ne!((code, out.as_str()), (0, "ok\n"), "{who:?}: {err}");
        assert!(err.contains("--network none"), "{who:?}: {err}");
        // A suite that waits for the server it could not start runs into the time limit,
        // whose warning says the refusal came first.
        let waits = "import socket, time\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\nexcept OSError:\n    pass\ntime.sleep(60)\n";
        let (_, _, err) = run(&["--timeout", "2"], waits);
        assert!(
            err.contains("was refused socket")
                && err.contains("timed out after")
                && err.contains("it had been refused socket"),
            "{who:?}: {err}"
        );
        // Asked for: the suite's servers work, and nothing is refused.
        let (code, out, err) = run(&["--network", "none"], script);
        assert_eq!((code, out.as_str()), (0, "ok\n"), "{who:?}: {err}");
        assert!(!err.contains("refused"), "{who:?}: {err}");
        // The host's loopback stays out of reach.
        let before = host.hits();
        let (_, out, err) = run(&["--network", "none"], &reach_host);
        assert!(out.starts_with("refused"), "{who:?}: {out}{err}");
        assert_eq!(host.hits(), before, "{who:?}");

        // The same through exec --json: the violation's change, applied once, runs it.
        let request = |extra: &str| {
            serde_json::json!({
                "argv": ["python3", "-c", script],
                "profile": "shell",
            })
            .to_string()
            .replacen('{', &format!("{{{extra}"), 1)
        };
        let v = exec_json_as(who, &request(""));
        assert_ne!(v["stdout"], "ok\n", "{who:?}: {v}");
        let changes: Vec<&str> = v["violations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["change"].as_str())
            .collect();
        assert!(changes.contains(&"\"network\": \"none\""), "{who:?}: {v}");
        let v = exec_json_as(who, &request("\"network\": \"none\", "));
        assert_eq!(v["stdout"], "ok\n", "{who:?}: {v}");
        assert_eq!(v["violations"], serde_json::json!([]), "{who:?}: {v}");
    }
}

/// Where the host may not take a job's descriptors (Docker's default seccomp profile without
/// `CAP_SYS_PTRACE`; here the host itself runs under the preload's filter refusing
/// `pidfd_getfd`), `none` asked for still gives a shell its TCP and UDP loopback, but unix
/// sockets stay refused, and named: a pathname socket would reach the host's services, and
/// their connects could not be checked. Control: the same run without that filter makes its
/// `multiprocessing` manager.
#[test]
fn without_pidfd_getfd_none_keeps_unix_sockets_refused_and_named() {
    let (_lib_dir, lib) = common::extracted_preload();
    let script = "import multiprocessing, socket\n\
        s = socket.socket(); s.bind(('127.0.0.1', 0)); print('tcp ok', flush=True)\n\
        with multiprocessing.Manager() as m: print('unix ok')\n";
    for who in WHO {
        let run = |denied: bool| {
            let mut c = common::sandbox(who);
            c.env("HOME", "/nonexistent")
                .current_dir("/tmp")
                .args([
                    "run",
                    "--allow-root",
                    "--profile",
                    "shell",
                    "--network",
                    "none",
                ])
                .args(["--", "python3", "-c", script]);
            if denied {
                common::under_host_filter(&mut c, &lib, "pidfd_getfd", "errno:EPERM");
            }
            let o = c.output().unwrap();
            (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        let (out, err) = run(false);
        assert_eq!(out, "tcp ok\nunix ok\n", "{who:?} control: {err}");
        let (out, err) = run(true);
        assert_eq!(out, "tcp ok\n", "{who:?}: {err}");
        assert!(
            err.contains("was refused socket") && err.contains("profile shell"),
            "{who:?}: {err}"
        );
    }
}
