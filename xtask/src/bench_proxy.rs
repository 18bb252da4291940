//! `cargo xtask bench`, proxy section: what the allowlist proxy adds to one small HTTP
//! request. A small origin server, the proxy (the host library's, as `network proxy` runs it)
//! and the client run in this process on loopback; each request is a new connection, a
//! `GET`, and the response read to its end. Direct requests, requests forwarded by the proxy
//! and requests through a `CONNECT` tunnel take turns in interleaved rounds; the figures are
//! medians of per-request wall time, and the process's CPU time (getrusage: client, proxy and
//! origin together) per request in each round.

use crate::bench_exec::median;
use anyhow::{bail, Context, Result};
use sandbox_host::proxy::{Allowlist, Config, Naming, Pins, Proxy};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Rounds the requests are split into.
const ROUNDS: usize = 20;
/// The origin's answer: a small response.
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n";

/// How a request reaches the origin.
#[derive(Clone, Copy)]
enum Way {
    Direct,
    Forwarded,
    Tunnelled,
}

/// Runs `n` requests of each kind and returns a Markdown section with the figures.
pub fn run(n: usize) -> Result<String> {
    let origin = start_origin()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let proxy_addr = listener.local_addr()?;
    let proxy = Proxy::new(Config::new(
        Allowlist::parse(&["bench.test"]).map_err(|(_, e)| anyhow::anyhow!("{e}"))?,
        Pins::parse_list(&[format!("bench.test:{}:127.0.0.1", origin.port())])
            .map_err(|(_, e)| anyhow::anyhow!("{e}"))?,
        Naming::Flags,
    ));
    proxy.serve(listener)?;
    let ways = [Way::Direct, Way::Forwarded, Way::Tunnelled];
    for w in ways {
        for _ in 0..20 {
            request(w, origin, proxy_addr)?;
        }
    }
    let per_round = (n / ROUNDS).max(1);
    let mut wall: [Vec<f64>; 3] = Default::default();
    let mut cpu: [Vec<f64>; 3] = Default::default();
    for _ in 0..ROUNDS {
        for (i, w) in ways.iter().enumerate() {
            let c0 = cpu_time();
            for _ in 0..per_round {
                let t = Instant::now();
                request(*w, origin, proxy_addr)?;
                wall[i].push(t.elapsed().as_secs_f64() * 1e6);
            }
            cpu[i].push((cpu_time() - c0).as_secs_f64() * 1e6 / per_round as f64);
        }
    }
    proxy.stop();
    let wall: Vec<f64> = wall.iter().map(|v| median(v)).collect();
    let cpu: Vec<f64> = cpu.iter().map(|v| median(v)).collect();
    let mut s = String::from("## Proxy: added time per small HTTP request\n\n");
    let _ = write!(
        s,
        "{} requests of each kind, {ROUNDS} interleaved rounds of {per_round}; each a new TCP \
         connection on loopback, `GET`, a 6-byte body read to the end. The proxy is the host \
         library's, as `network proxy` runs it (one thread per connection; the name pinned, so no \
         DNS lookup is timed). Median wall time per request, and median over rounds of the \
         process's CPU time per request (client, proxy and origin run in the one process).\n\n\
         | way | wall µs | added wall µs | CPU µs | added CPU µs |\n|---|---:|---:|---:|---:|\n",
        per_round * ROUNDS
    );
    let names = [
        "direct to the origin",
        "forwarded by the proxy (`GET http://...`)",
        "through a `CONNECT` tunnel",
    ];
    for i in 0..3 {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:+.0} | {:.0} | {:+.0} |",
            names[i],
            wall[i],
            wall[i] - wall[0],
            cpu[i],
            cpu[i] - cpu[0]
        );
    }
    let worst = (wall[1] - wall[0]).max(wall[2] - wall[0]);
    let _ = writeln!(
        s,
        "\nThe proxy adds **{:.2} ms** at most (target ≤ 1 ms: {}).\n",
        worst / 1000.0,
        if worst <= 1000.0 { "met" } else { "missed" }
    );
    Ok(s)
}

/// A minimal origin on a thread: reads a request head, answers, closes.
fn start_origin() -> Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(RESPONSE);
        }
    });
    Ok(addr)
}

fn request(way: Way, origin: SocketAddr, proxy: SocketAddr) -> Result<()> {
    let port = origin.port();
    let mut s = TcpStream::connect(match way {
        Way::Direct => origin,
        _ => proxy,
    })?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    match way {
        Way::Direct => write!(s, "GET / HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n")?,
        Way::Forwarded => write!(
            s,
            "GET http://bench.test:{port}/ HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n"
        )?,
        Way::Tunnelled => {
            write!(
                s,
                "CONNECT bench.test:{port} HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n"
            )?;
            let mut ok = [0u8; 39];
            s.read_exact(&mut ok)
                .context("reading the CONNECT answer")?;
            if !ok.starts_with(b"HTTP/1.1 200") {
                bail!("CONNECT refused: {}", String::from_utf8_lossy(&ok));
            }
            write!(s, "GET / HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n")?;
        }
    }
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    if !out.ends_with(b"hello\n") {
        bail!("unexpected answer: {}", String::from_utf8_lossy(&out));
    }
    Ok(())
}

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}
