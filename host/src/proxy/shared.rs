//! The state a proxy's threads share (configuration, records, live connections): below the
//! server that creates it and the connection handlers (forward, relay, tunnel, dial) that use
//! it.

use super::config::Config;
use super::record::Records;
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;

/// What the proxy's threads share: its configuration, records and live connections.
pub(super) struct Shared {
    pub(super) config: Config,
    pub(super) records: Records,
    pub(super) live: Mutex<Live>,
    pub(super) idle: Condvar,
}

/// The proxy's listeners, loops and connections, under [`Shared`]'s lock.
#[derive(Default)]
pub(super) struct Live {
    pub(super) stopped: bool,
    pub(super) next: u64,
    /// Each connection's sockets, so that `stop` can shut them down.
    pub(super) conns: HashMap<u64, Vec<TcpStream>>,
    pub(super) listeners: Vec<TcpListener>,
    pub(super) loops: Vec<JoinHandle<()>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let live = self.live.get_mut().unwrap_or_else(|p| p.into_inner());
        for l in &live.listeners {
            shutdown_listener(l);
        }
    }
}

impl Shared {
    /// The live state, even if a thread panicked holding it.
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `stream` to connection `id`'s sockets; false (and the stream shut down) when the
    /// proxy is stopping.
    pub(super) fn track(&self, id: u64, stream: &TcpStream) -> bool {
        let mut live = self.lock();
        let clone = stream.try_clone();
        match (live.stopped, clone) {
            (false, Ok(c)) => {
                live.conns.entry(id).or_default().push(c);
                true
            }
            _ => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                false
            }
        }
    }

    /// Forgets connection `id`'s sockets; wakes `stop` when none are left.
    pub(super) fn finish(&self, id: u64) {
        let mut live = self.lock();
        live.conns.remove(&id);
        if live.conns.is_empty() {
            self.idle.notify_all();
        }
    }
}

/// Makes a thread blocked in `accept` on this listener return (Linux answers EINVAL).
pub(super) fn shutdown_listener(l: &TcpListener) {
    crate::sys::shutdown(l.as_raw_fd());
}
