//! Serving: accept loops on the listeners the proxy is given, one thread per connection, a cap
//! on connections at once, and a stop that closes every listener and connection.

use super::config::Config;
use super::head::{self, HeadError, Kind};
use super::record::{Destination, Records};
use super::shared::{serve_for, shutdown_listener, Attribution, Live, Shared};
use super::{forward, relay, reply, tunnel};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Stack of a connection thread: heads are parsed into heap buffers.
const CONNECTION_STACK: usize = 256 * 1024;
/// How long `stop` waits for connection threads to finish after closing their sockets.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running proxy: its configuration, records, listeners and live connections. Cloning
/// shares it.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

/// What an accepted connection is for.
#[derive(Clone, Copy)]
enum Service {
    /// The HTTP proxy.
    Http,
    /// A plain TCP relay to this address (a host port).
    Relay(SocketAddr),
}

impl Proxy {
    /// A proxy with `config`, serving nothing yet.
    pub fn new(config: Config) -> Proxy {
        Proxy {
            shared: Arc::new(Shared {
                config,
                records: Records::default(),
                attribution: OnceLock::new(),
                live: Mutex::new(Live::default()),
                idle: Condvar::new(),
            }),
        }
    }

    /// Serves the HTTP proxy on `listener` (already bound and listening) until [`stop`].
    ///
    /// [`stop`]: Proxy::stop
    pub fn serve(&self, listener: TcpListener) -> io::Result<()> {
        self.start(listener, Service::Http)
    }

    /// Relays every connection accepted on `listener` to `to` (a port of the host's own
    /// loopback, made reachable inside a sandbox), recording each as a destination.
    pub fn relay(&self, listener: TcpListener, to: SocketAddr) -> io::Result<()> {
        self.start(listener, Service::Relay(to))
    }

    /// Has every connection accepted from now on looked up with `attribution`, and its
    /// destinations recorded in the record it gives too (set once; later calls do nothing).
    pub fn attribute(&self, attribution: Arc<dyn Attribution>) {
        let _ = self.shared.attribution.set(attribution);
    }

    /// The destinations tried so far.
    pub fn destinations(&self) -> Vec<Destination> {
        self.shared.records.snapshot()
    }

    /// Attempts at new destinations beyond the record's capacity.
    pub fn destinations_dropped(&self) -> u64 {
        self.shared.records.dropped()
    }

    /// Closes every listener and connection and waits (briefly) for their threads.
    pub fn stop(&self) {
        let loops = {
            let mut live = self.shared.lock();
            live.stopped = true;
            for l in &live.listeners {
                shutdown_listener(l);
            }
            for streams in live.conns.values() {
                for s in streams {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
            std::mem::take(&mut live.loops)
        };
        for l in loops {
            let _ = l.join();
        }
        let deadline = Instant::now() + STOP_GRACE;
        let mut live = self.shared.lock();
        while !live.conns.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            live = self
                .shared
                .idle
                .wait_timeout(live, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        live.listeners.clear();
    }

    fn start(&self, listener: TcpListener, service: Service) -> io::Result<()> {
        listener.set_nonblocking(false)?;
        let mut live = self.shared.lock();
        if live.stopped {
            return Err(io::Error::other("the proxy was stopped"));
        }
        live.listeners.push(listener.try_clone()?);
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(&shared, &listener, service))?;
        live.loops.push(handle);
        Ok(())
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, service: Service) {
    loop {
        let accepted = listener.accept();
        let (stream, id) = {
            let mut live = shared.lock();
            if live.stopped {
                return;
            }
            let mut stream = match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    drop(live);
                    match e.raw_os_error() {
                        Some(libc::EINVAL | libc::EBADF | libc::ENOTSOCK) => return,
                        // Out of descriptors or memory: let connections finish, then retry.
                        _ => std::thread::sleep(Duration::from_millis(10)),
                    }
                    continue;
                }
            };
            if live.conns.len() >= shared.config.max_connections {
                drop(live);
                // Answered inline without waiting: the answer fits in the socket's buffer.
                let _ = stream.set_nonblocking(true);
                let _ = stream.write_all(&reply::response(
                    503,
                    "sandbox: the proxy is serving too many connections at once; retry later",
                ));
                let _ = stream.shutdown(std::net::Shutdown::Write);
                continue;
            }
            live.next += 1;
            let id = live.next;
            match stream.try_clone() {
                Ok(c) => {
                    live.conns.insert(id, vec![c]);
                }
                Err(_) => continue,
            }
            (stream, id)
        };
        let _ = stream.set_nodelay(true);
        let for_thread = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("proxy-conn".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                serve_for(
                    for_thread
                        .attribution
                        .get()
                        .and_then(|a| a.records_for(&stream)),
                );
                match service {
                    Service::Http => serve_http(&for_thread, id, stream),
                    Service::Relay(to) => relay::serve(&for_thread, id, stream, to),
                }
                for_thread.finish(id);
            });
        if spawned.is_err() {
            shared.finish(id);
        }
    }
}

/// One client connection to the HTTP proxy: one request, then the connection closes.
fn serve_http(shared: &Shared, id: u64, mut client: TcpStream) {
    let c = &shared.config;
    let deadline = Instant::now() + c.head_timeout;
    let head = match head::read(
        &mut client,
        Kind::Request,
        Vec::new(),
        c.max_head_bytes,
        Some(deadline),
    ) {
        Ok(h) => h,
        Err(HeadError::Empty | HeadError::Io(_)) => return,
        Err(HeadError::Malformed(m)) => {
            return reply::send(
                &mut client,
                400,
                &format!("sandbox: bad request to the proxy: {m}"),
            )
        }
        Err(HeadError::TooLarge(m)) => {
            return reply::send(
                &mut client,
                400,
                &format!("sandbox: request refused by the proxy: {m}"),
            )
        }
        Err(HeadError::TooSlow) => {
            return reply::send(
                &mut client,
                408,
                &format!(
                    "sandbox: the request head did not arrive within {} s",
                    c.head_timeout.as_secs_f64()
                ),
            )
        }
    };
    let _ = client.set_read_timeout(None);
    if head.method.eq_ignore_ascii_case("CONNECT") {
        tunnel::serve(shared, id, client, head);
    } else {
        forward::serve(shared, id, client, head);
    }
}
