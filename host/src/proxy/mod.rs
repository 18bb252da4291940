//! The domain-allowlist HTTP proxy: the only way out of a sandbox run with `network proxy`.
//!
//! It forwards plain HTTP requests (absolute `http://` URIs) and tunnels `CONNECT host:port`
//! (HTTPS and anything else over TCP) to the names the user allowed (`example.com`,
//! `*.example.com`); every other destination gets `403` with a body naming the domain and the
//! option that would allow it. An allowed name that resolves to a loopback, private,
//! link-local, CGNAT or cloud-metadata address is refused unless the user pinned it
//! (`--resolve NAME:ADDR`). Garbage, oversized heads and slow clients get `400`/`408` and the
//! proxy keeps serving. Every destination tried is recorded for the result.
//!
//! The proxy runs in the host process, one thread per connection (no async runtime), on a
//! listener it is given: an ordinary socket, or one created inside a sandbox's network
//! namespace, so the program inside reaches it at `127.0.0.1:PORT` and nothing else.
//! See `docs/isolation.md`.

pub mod address;
mod dial;
pub mod domain;
mod forward;
pub mod head;
pub mod record;
mod relay;
pub mod reply;
mod server;
pub mod target;
mod tunnel;

pub use address::Pins;
pub use domain::{Allowlist, Host, NameError, Pattern};
pub use record::{Destination, Records};
pub use server::Proxy;

use std::time::Duration;

/// Default limit on a request head (request line and headers), in bytes.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 16 * 1024;
/// Default time a client has to send a complete request head.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time to connect to an allowed destination.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default number of connections served at once; more get `503`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How refusals name the option that would change them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Naming {
    /// Command-line flags: `--allow-domain NAME`, `--resolve NAME:ADDR`.
    #[default]
    Flags,
    /// JSON request fields: `allow_domains`, `resolve`.
    Fields,
}

/// What the proxy allows and its bounds.
#[derive(Clone, Debug)]
pub struct Config {
    /// The domains it lets through.
    pub allow: Allowlist,
    /// Names pinned to addresses.
    pub pins: Pins,
    /// How refusals name options.
    pub naming: Naming,
    /// Limit on a request head, in bytes.
    pub max_head_bytes: usize,
    /// Time a client has to send a complete request head.
    pub head_timeout: Duration,
    /// Time to connect to a destination.
    pub connect_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl Config {
    /// A proxy allowing `allow`, with `pins`, and default bounds.
    pub fn new(allow: Allowlist, pins: Pins, naming: Naming) -> Config {
        Config {
            allow,
            pins,
            naming,
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}
