//! The allowlist proxy with real clients (curl, python3) and real servers (python3's
//! `http.server`, plain and TLS, and counting TCP listeners), the proxy on an ordinary
//! loopback listener. Each refusal has a control showing the same request gets through
//! when the policy allows it.

use sandbox_host::proxy::{Allowlist, Config, Naming, Pins, Proxy};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PYTHON: &str = "/usr/bin/python3";

/// An HTTP server: GET answers with the Host header and path it saw, POST echoes the body.
const ORIGIN: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.reply(f"host={self.headers.get('Host')} path={self.path}\n".encode())
    def do_POST(self):
        self.reply(self.rfile.read(int(self.headers.get("Content-Length", 0))))
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
if len(sys.argv) > 2:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

/// A python3 origin server, killed when dropped.
struct Origin {
    child: Child,
    port: u16,
}

impl Origin {
    fn start(tls: Option<(&Path, &Path)>) -> Origin {
        let mut c = Command::new(PYTHON);
        bare(&mut c).arg("-c").arg(ORIGIN);
        if let Some((cert, key)) = tls {
            c.arg(cert).arg(key);
        }
        let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Origin {
            child,
            port: line.trim().parse().unwrap(),
        }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP listener that counts the connections arriving at it and answers each with a
/// minimal HTTP response.
struct Counter {
    addr: SocketAddr,
    count: Arc<AtomicUsize>,
}

impl Counter {
    fn start() -> Counter {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                let _ = s.read(&mut [0u8; 4096]);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\ncounted\n",
                );
            }
        });
        Counter { addr, count }
    }

    fn hits(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

fn bare(c: &mut Command) -> &mut Command {
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
}

/// A proxy on 127.0.0.1:<free port>, allowing `allow`, with `pins` (`NAME:PORT:ADDR`).
fn proxy_with(
    allow: &[&str],
    pins: &[String],
    tune: impl FnOnce(&mut Config),
) -> (Proxy, SocketAddr) {
    let mut config = Config::new(
        Allowlist::parse(allow).unwrap(),
        Pins::parse_list(pins).unwrap(),
        Naming::Flags,
    );
    tune(&mut config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::new(config);
    proxy.serve(listener).unwrap();
    (proxy, addr)
}

fn proxy(allow: &[&str], pins: &[String]) -> (Proxy, SocketAddr) {
    proxy_with(allow, pins, |_| {})
}

/// curl through the proxy; stdout is the body, `-w` appends the status on its own line.
fn curl(proxy: SocketAddr, args: &[&str]) -> (u16, String) {
    let out = bare(&mut Command::new("curl"))
        .args(["-sS", "--max-time", "20", "-w", "\n%{http_code}", "-x"])
        .arg(format!("http://{proxy}"))
        .args(args)
        .output()
        .unwrap();
    split_status(&out)
}

fn split_status(out: &Output) -> (u16, String) {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or(0),
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// One raw exchange: send `bytes`, read the answer until the proxy closes.
fn raw(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

fn pin(name: &str, port: u16) -> (String, String) {
    (
        format!("{name}:{port}:127.0.0.1"),
        format!("http://{name}:{port}/hello?x=1"),
    )
}

#[test]
fn curl_reaches_an_allowed_pinned_name_and_the_host_header_follows_the_uri() {
    let origin = Origin::start(None);
    let (pin, url) = pin("api.allowed.test", origin.port);
    let (p, addr) = proxy(&["api.allowed.test"], &[pin]);
    let (code, body) = curl(addr, &["-H", "Host: other.example", &url]);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        format!("host=api.allowed.test:{} path=/hello?x=1\n", origin.port)
    );
    let d = p.destinations();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].host.as_str(), d[0].port, d[0].allowed),
        ("api.allowed.test", origin.port, true)
    );
    p.stop();
}

#[test]
fn an_unlisted_name_gets_403_naming_the_option_and_nothing_arrives() {
    let counter = Counter::start();
    let port = counter.addr.port();
    let pins = vec![
        format!("evil.test:{port}:127.0.0.1"),
        format!("good.test:{port}:127.0.0.1"),
    ];
    let (p, addr) = proxy(&["good.test"], &pins);
    for url in [
        format!("http://evil.test:{port}/"),
        format!("https://evil.test:{port}/"),
    ] {
        let (code, body) = curl(addr, &[&url]);
        // For https:// curl reports the CONNECT refusal itself; the status is in its error.
        assert!(code == 403 || body.contains("403"), "{url}: {code} {body}");
    }
    let (code, body) = curl(addr, &[&format!("http://evil.test:{port}/")]);
    assert_eq!(code, 403);
    assert!(
        body.contains(
            "`evil.test` is not an allowed domain; to allow it, add --allow-domain evil.test"
        ),
        "{body}"
    );
    assert_eq!(counter.hits(), 0, "a refused request reached the server");
    // Control: the same server through an allowed name is reached.
    let (code, body) = curl(addr, &[&format!("http://good.test:{port}/")]);
    assert_eq!((code, body.as_str()), (200, "counted\n"));
    assert_eq!(counter.hits(), 1);
    let d = p.destinations();
    let evil = d.iter().find(|d| d.host == "evil.test").unwrap();
    assert!(!evil.allowed && evil.attempts == 3, "{d:?}");
    assert_eq!(evil.reason.as_deref(), Some("not in the allowed domains"));
    p.stop();
}

#[test]
fn https_connect_tunnels_tls_to_an_allowed_name_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let gen = bare(&mut Command::new("openssl"))
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=secure.test",
            "-addext",
            "subjectAltName=DNS:secure.test,DNS:blocked.test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(gen.success());
    let origin = Origin::start(Some((&cert, &key)));
    let pins = vec![
        format!("secure.test:{}:127.0.0.1", origin.port),
        format!("blocked.test:{}:127.0.0.1", origin.port),
    ];
    let (p, addr) = proxy(&["secure.test"], &pins);
    let cacert = cert.to_str().unwrap();
    let (code, body) = curl(
        addr,
        &[
            "--cacert",
            cacert,
            &format!("https://secure.test:{}/tls", origin.port),
        ],
    );
    assert_eq!(
        (code, body.as_str()),
        (
            200,
            format!("host=secure.test:{} path=/tls\n", origin.port).as_str()
        )
    );
    // The same server under a name that is not allowed: the CONNECT is refused.
    let (code, body) = curl(
        addr,
        &[
            "--cacert",
            cacert,
            &format!("https://blocked.test:{}/tls", origin.port),
        ],
    );
    assert_ne!(code, 200, "{body}");
    assert!(body.contains("403"), "{body}");
    // python3's urllib, through the lowercase variables curl also reads.
    let script = format!(
        "import urllib.request, ssl\nctx = ssl.create_default_context(cafile={cacert:?})\nprint(urllib.request.urlopen('https://secure.test:{}/py', context=ctx).read().decode(), end='')",
        origin.port
    );
    let out = bare(&mut Command::new(PYTHON))
        .env("https_proxy", format!("http://{addr}"))
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("host=secure.test:{} path=/py\n", origin.port),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = p.destinations();
    assert!(
        d.iter()
            .any(|d| d.host == "secure.test" && d.allowed && d.attempts == 2),
        "{d:?}"
    );
    assert!(
        d.iter().any(|d| d.host == "blocked.test" && !d.allowed),
        "{d:?}"
    );
    p.stop();
}

#[test]
fn wildcards_cover_subdomains_but_not_the_apex() {
    let origin = Origin::start(None);
    let pins: Vec<String> = ["a.example.test", "b.c.example.test", "example.test"]
        .iter()
        .map(|n| format!("{n}:{}:127.0.0.1", origin.port))
        .collect();
    let (p, addr) = proxy(&["*.example.test"], &pins);
    for (name, want) in [
        ("a.example.test", 200),
        ("b.c.example.test", 200),
        ("example.test", 403),
    ] {
        let (code, body) = curl(addr, &[&format!("http://{name}:{}/", origin.port)]);
        assert_eq!(code, want, "{name}: {body}");
    }
    p.stop();
}

#[test]
fn allowed_names_leading_to_internal_addresses_are_refused_unless_pinned() {
    let origin = Origin::start(None);
    // `localhost` resolves to loopback: a rebinding-style answer for an allowed name.
    let (p, addr) = proxy(&["localhost", "169.254.169.254"], &[]);
    let (code, body) = curl(addr, &[&format!("http://localhost:{}/", origin.port)]);
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("a loopback address")
            && body.contains(&format!("--resolve localhost:{}:127.0.0.1", origin.port)),
        "{body}"
    );
    let (code, body) = curl(
        addr,
        &[
            "--connect-timeout",
            "5",
            "http://169.254.169.254/latest/meta-data/",
        ],
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("cloud metadata"), "{body}");
    let d = p.destinations();
    assert!(d.iter().all(|d| !d.allowed), "{d:?}");
    p.stop();
    // Control: pinned by the user, the same name reaches the server.
    let (p, addr) = proxy(
        &["localhost"],
        &[format!("localhost:{}:127.0.0.1", origin.port)],
    );
    let (code, _) = curl(addr, &[&format!("http://localhost:{}/", origin.port)]);
    assert_eq!(code, 200);
    p.stop();
}

/// A pin opens its port only: `localhost` pinned to loopback on the origin's port reaches the
/// origin, and on the port of another loopback server it is refused (`403`, the exact pin for
/// that port named) with nothing arriving, through curl (forwarded and tunnelled) and
/// python3. Control: pinned for that port too, the other server is reached, so the refusal is
/// the pin's port and not the server.
#[test]
fn a_pin_opens_its_port_and_not_the_other_loopback_ports() {
    let origin = Origin::start(None);
    let other = Counter::start();
    let q = other.addr.port();
    let (p, addr) = proxy(
        &["localhost"],
        &[format!("localhost:{}:127.0.0.1", origin.port)],
    );
    let (code, body) = curl(addr, &[&format!("http://localhost:{}/", origin.port)]);
    assert_eq!(
        (code, body.as_str()),
        (
            200,
            format!("host=localhost:{} path=/\n", origin.port).as_str()
        )
    );
    let (code, body) = curl(addr, &[&format!("http://localhost:{q}/")]);
    assert_eq!(code, 403, "{body}");
    let want = format!("which allowed names may not reach (pinned for port {} only); if that is intended, pin it for this port with --resolve localhost:{q}:127.0.0.1", origin.port);
    assert!(body.contains(&want), "{body}");
    let (code, body) = curl(addr, &["-p", &format!("http://localhost:{q}/")]);
    assert_ne!(code, 200, "{body}");
    assert!(body.contains("403"), "{body}");
    let script = format!(
        "import urllib.request, urllib.error\ntry:\n    urllib.request.urlopen('http://localhost:{q}/')\nexcept urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())"
    );
    let out = bare(&mut Command::new(PYTHON))
        .env("http_proxy", format!("http://{addr}"))
        .args(["-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("403 ") && text.contains(&want), "{text}");
    assert_eq!(other.hits(), 0, "a request on an unpinned port arrived");
    let d = p.destinations();
    assert!(
        d.iter()
            .any(|d| d.port == q && !d.allowed && d.attempts == 3),
        "{d:?}"
    );
    p.stop();
    // A name the resolver does not know, pinned for one port: another port does not resolve,
    // and the answer says which port the pin is for.
    let (p, addr) = proxy(
        &["api.test"],
        &[format!("api.test:{}:127.0.0.1", origin.port)],
    );
    let (code, body) = curl(addr, &[&format!("http://api.test:{q}/")]);
    assert_eq!(code, 502, "{body}");
    assert!(
        body.contains(&format!("(pinned for port {} only)", origin.port)),
        "{body}"
    );
    assert_eq!(other.hits(), 0);
    p.stop();
    // JSON clients are told the field.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let p = Proxy::new(Config::new(
        Allowlist::parse(&["localhost"]).unwrap(),
        Pins::parse_list(&[format!("localhost:{}:127.0.0.1", origin.port)]).unwrap(),
        Naming::Fields,
    ));
    p.serve(listener).unwrap();
    let (code, body) = curl(addr, &[&format!("http://localhost:{q}/")]);
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!(
            "\"resolve\": {{\"localhost:{q}\": \"127.0.0.1\"}}"
        )),
        "{body}"
    );
    p.stop();
    assert_eq!(other.hits(), 0);
    // Control: pinned for that port as well, the other server is reached.
    let pins = [
        format!("localhost:{}:127.0.0.1", origin.port),
        format!("localhost:{q}:127.0.0.1"),
    ];
    let (p, addr) = proxy(&["localhost"], &pins);
    let (code, body) = curl(addr, &[&format!("http://localhost:{q}/")]);
    assert_eq!((code, body.as_str()), (200, "counted\n"));
    assert_eq!(other.hits(), 1);
    p.stop();
}

#[test]
fn request_bodies_are_forwarded() {
    let origin = Origin::start(None);
    let (pin, _) = pin("post.test", origin.port);
    let (p, addr) = proxy(&["post.test"], &[pin]);
    let big = "x".repeat(300_000);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &big).unwrap();
    let data = format!("@{}", file.path().display());
    let (code, body) = curl(
        addr,
        &[
            "--data-binary",
            &data,
            &format!("http://post.test:{}/", origin.port),
        ],
    );
    assert_eq!(code, 200);
    assert_eq!(body.len(), big.len());
    p.stop();
}

#[test]
fn garbage_oversized_and_slow_clients_get_400_and_408_and_the_proxy_keeps_serving() {
    let origin = Origin::start(None);
    let (pin, url) = pin("ok.test", origin.port);
    let (p, addr) = proxy_with(&["ok.test"], &[pin], |c| {
        c.head_timeout = Duration::from_secs(1)
    });
    // A slow client holds a connection open without finishing its head...
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET http://ok.test/ HTTP/1.1\r\nX-Slow: ")
        .unwrap();
    // ...while garbage, an oversized head and a non-proxy request get 400.
    let garbage = raw(
        addr,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    );
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    let long = format!(
        "GET {url} HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "y".repeat(64 * 1024)
    );
    let over = raw(addr, long.as_bytes());
    assert!(
        over.starts_with("HTTP/1.1 400 ") && over.contains("longer than 16384 bytes"),
        "{over}"
    );
    let origin_form = raw(addr, b"GET /index.html HTTP/1.1\r\nHost: ok.test\r\n\r\n");
    assert!(
        origin_form.starts_with("HTTP/1.1 400 ") && origin_form.contains("not an absolute URI"),
        "{origin_form}"
    );
    let bad_host = raw(addr, b"GET http://0x7f.1/ HTTP/1.1\r\n\r\n");
    assert!(bad_host.starts_with("HTTP/1.1 400 "), "{bad_host}");
    // The slow client gets 408 once its time is up.
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    // Still serving.
    let (code, _) = curl(addr, &[&url]);
    assert_eq!(code, 200);
    // Control for the size limit: a large but allowed head passes.
    let fits = format!(
        "GET {url} HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "y".repeat(8 * 1024)
    );
    assert!(raw(addr, fits.as_bytes()).starts_with("HTTP/1.1 200 "));
    p.stop();
}

#[test]
fn json_clients_are_told_the_field_to_change() {
    let counter = Counter::start();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let p = Proxy::new(Config::new(
        Allowlist::parse(&["x.test"]).unwrap(),
        Pins::parse_list(&["x.test:80:127.0.0.1"]).unwrap(),
        Naming::Fields,
    ));
    p.serve(listener).unwrap();
    let (code, body) = curl(
        addr,
        &[&format!("http://pkg.test:{}/", counter.addr.port())],
    );
    assert_eq!(code, 403);
    assert!(body.contains("add \"pkg.test\" to allow_domains"), "{body}");
    p.stop();
}

#[test]
fn stop_closes_listeners_and_open_tunnels() {
    // A server that accepts and never answers nor closes.
    let hold = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hold.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for s in hold.incoming() {
            kept.push(s);
        }
    });
    let (p, addr) = proxy(&["hold.test"], &[format!("hold.test:{port}:127.0.0.1")]);
    let mut tunnel = TcpStream::connect(addr).unwrap();
    write!(tunnel, "CONNECT hold.test:{port} HTTP/1.1\r\n\r\n").unwrap();
    let mut buf = [0u8; 39];
    tunnel.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200 Connection established\r\n\r\n");
    // Control: the tunnel stays open while the proxy runs.
    tunnel
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let e = tunnel.read(&mut [0u8; 1]).unwrap_err();
    assert!(matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    p.stop();
    assert!(
        TcpStream::connect(addr).is_err(),
        "the listener still accepts"
    );
    tunnel
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(
        tunnel.read(&mut [0u8; 1]).unwrap(),
        0,
        "the tunnel was not closed"
    );
}
