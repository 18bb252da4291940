//! The domain-allowlist HTTP proxy: the only way out of a sandbox run with `network proxy`.
//!
//! It forwards plain HTTP requests (absolute `http://` URIs) and tunnels `CONNECT host:port`
//! (HTTPS and anything else over TCP) to the names the user allowed (`example.com`,
//! `*.example.com`); every other destination gets `403` with a body naming the domain and the
//! option that would allow it. An allowed name that resolves to a loopback, private,
//! link-local, CGNAT or cloud-metadata address is refused unless the user pinned it for that
//! port (`--resolve NAME:PORT:ADDR`). Garbage, oversized heads and slow clients get
//! `400`/`408` and the proxy keeps serving. Every destination tried is recorded for the result.
//!
//! The proxy runs in the host process, one thread per connection (no async runtime), on a
//! listener it is given: an ordinary socket, or one created inside a sandbox's network
//! namespace, so the program inside reaches it at `127.0.0.1:PORT` and nothing else.
//! See `docs/isolation.md`.

pub mod address;
mod config;
mod dial;
pub mod domain;
mod forward;
pub mod head;
pub mod pins;
pub mod presets;
pub mod record;
mod relay;
pub mod reply;
mod server;
mod shared;
pub mod target;
mod tunnel;

pub use config::{
    Config, Naming, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEAD_BYTES,
};
pub use domain::{Allowlist, Host, NameError, Pattern};
pub use pins::{Pins, MAX_PINS};
pub use record::{Destination, Records};
pub use server::Proxy;
pub use shared::Attribution;
