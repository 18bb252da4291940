//! Host ports: each connection accepted inside the sandbox is relayed to the same port of the
//! host's own loopback, and recorded as a destination.

use super::shared::Shared;
use super::tunnel::splice;
use std::net::{SocketAddr, TcpStream};

/// Relays one accepted connection to `to`.
pub fn serve(shared: &Shared, id: u64, client: TcpStream, to: SocketAddr) {
    let host = to.ip().to_string();
    match TcpStream::connect_timeout(&to, shared.config.connect_timeout) {
        Ok(upstream) => {
            shared.allowed(&host, to.port(), None);
            let _ = upstream.set_nodelay(true);
            if shared.track(id, &upstream) {
                splice(client, upstream);
            }
        }
        Err(e) => {
            let words = crate::refusal::io_reason(&e).to_lowercase();
            shared.allowed(&host, to.port(), Some(words));
        }
    }
}
