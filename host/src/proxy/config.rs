//! What a proxy allows and its bounds: the configuration every part of the proxy reads.

use super::domain::Allowlist;
use super::pins::Pins;
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
    /// Command-line flags: `--allow-domain NAME`, `--resolve NAME:PORT:ADDR`.
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
    /// Names pinned to addresses, each for one port (or every port of a public address).
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
