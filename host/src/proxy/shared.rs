//! The state a proxy's threads share (configuration, records, live connections): below the
//! server that creates it and the connection handlers (forward, relay, tunnel, dial) that use
//! it.

use super::config::Config;
use super::record::Records;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

/// Tells who made a connection, so that its destinations are also recorded for it alone (a
/// session's commands share one proxy; each command's result lists its own).
pub trait Attribution: Send + Sync {
    /// The record of whoever holds the other end of `client` (the accepted socket), if that
    /// one keeps a record.
    fn records_for(&self, client: &TcpStream) -> Option<Arc<Records>>;
}

thread_local! {
    /// The record of the connection this thread serves, besides the proxy's own (each
    /// connection has a thread of its own).
    static OWNER: RefCell<Option<Arc<Records>>> = const { RefCell::new(None) };
}

/// Sets (or clears) the record of the connection the calling thread serves.
pub(super) fn serve_for(owner: Option<Arc<Records>>) {
    OWNER.with(|o| *o.borrow_mut() = owner);
}

/// What the proxy's threads share: its configuration, records and live connections.
pub(super) struct Shared {
    pub(super) config: Config,
    pub(super) records: Records,
    /// Who made each connection, where the proxy's user wants destinations told apart.
    pub(super) attribution: OnceLock<Arc<dyn Attribution>>,
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
    /// Notes an allowed attempt, in the proxy's record and the connection's own.
    pub(super) fn allowed(&self, host: &str, port: u16, error: Option<String>) {
        OWNER.with(|o| {
            if let Some(r) = o.borrow().as_ref() {
                r.allowed(host, port, error.clone());
            }
        });
        self.records.allowed(host, port, error);
    }

    /// Notes a refused attempt, in the proxy's record and the connection's own.
    pub(super) fn refused(&self, host: &str, port: u16, reason: String) {
        OWNER.with(|o| {
            if let Some(r) = o.borrow().as_ref() {
                r.refused(host, port, reason.clone());
            }
        });
        self.records.refused(host, port, reason);
    }

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
