//! Where an allowed name may lead: the address classes a resolved name must not reach
//! (loopback, private, link-local, CGNAT, cloud metadata...), and resolution itself, which a
//! pin (`super::pins`) replaces.
//!
//! The check is on the addresses the proxy then connects to, never on a second lookup, so a
//! name whose DNS answer changes between check and use (DNS rebinding) gains nothing.

use super::domain::Host;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// Why a destination's addresses were not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// Every address of the name is in a class the proxy does not reach without a pin.
    Internal {
        /// The first such address.
        addr: IpAddr,
        /// Its class, in words (`loopback`, `cloud metadata`...).
        class: &'static str,
    },
    /// The name does not resolve.
    NoAddress(String),
}

/// The addresses to try for `host:port`: `pinned` (the address the user pinned the name to
/// for this port), or the permitted ones among those the resolver returns (internal addresses
/// are dropped; if none is left, the destination is refused).
pub fn resolve(
    host: &Host,
    port: u16,
    pinned: Option<IpAddr>,
) -> Result<Vec<SocketAddr>, Unreachable> {
    if let Some(ip) = pinned {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let found: Vec<SocketAddr> = match host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(n) => match (n.as_str(), port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(Unreachable::NoAddress(crate::refusal::io_reason(&e))),
        },
    };
    let mut first_internal = None;
    let mut permitted = Vec::new();
    for a in found {
        match internal_class(a.ip()) {
            Some(class) => {
                first_internal.get_or_insert(Unreachable::Internal {
                    addr: a.ip(),
                    class,
                });
            }
            None => {
                if !permitted.contains(&a) {
                    permitted.push(a);
                }
            }
        }
    }
    if permitted.is_empty() {
        return Err(first_internal
            .unwrap_or_else(|| Unreachable::NoAddress("no address found".to_string())));
    }
    Ok(permitted)
}

/// The class of an address an allowed name must not lead to, or `None` for a public one.
pub fn internal_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => v4_class(a),
        IpAddr::V6(a) => v6_class(a),
    }
}

fn v4_class(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    let n = u32::from(a);
    let within =
        |base: [u8; 4], bits: u32| n >> (32 - bits) == u32::from_be_bytes(base) >> (32 - bits);
    Some(match () {
        _ if a == Ipv4Addr::new(169, 254, 169, 254) || a == Ipv4Addr::new(100, 100, 100, 200) => {
            "cloud metadata"
        }
        _ if o[0] == 0 => "unspecified (0.0.0.0/8)",
        _ if o[0] == 127 => "loopback",
        _ if o[0] == 10 || within([172, 16, 0, 0], 12) || within([192, 168, 0, 0], 16) => "private",
        _ if within([100, 64, 0, 0], 10) => "shared (CGNAT)",
        _ if within([169, 254, 0, 0], 16) => "link-local",
        _ if within([192, 0, 0, 0], 24) => "IETF protocol assignments",
        _ if within([198, 18, 0, 0], 15) => "benchmarking",
        _ if o[0] >= 224 => "multicast or reserved",
        _ => return None,
    })
}

fn v6_class(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4_class(v4);
    }
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway reaches.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return v4_class(Ipv4Addr::from(u128::from(a) as u32));
    }
    if s[0] == 0x2002 {
        return v4_class(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    Some(match () {
        _ if a == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => "cloud metadata",
        _ if a.is_loopback() => "loopback",
        _ if a.is_unspecified() => "unspecified",
        _ if s[0..6] == [0, 0, 0, 0, 0, 0] => "IPv4-compatible (deprecated)",
        _ if s[0] & 0xfe00 == 0xfc00 => "unique local (private)",
        _ if s[0] & 0xffc0 == 0xfe80 => "link-local",
        _ if s[0] & 0xffc0 == 0xfec0 => "site-local (deprecated)",
        _ if s[0] & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<&'static str> {
        internal_class(s.parse().unwrap())
    }

    #[test]
    fn internal_addresses_are_named() {
        for (a, want) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("169.254.169.254", "cloud metadata"),
            ("100.100.100.200", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("0.0.0.0", "unspecified (0.0.0.0/8)"),
            ("224.0.0.1", "multicast or reserved"),
            ("255.255.255.255", "multicast or reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fd12::1", "unique local (private)"),
            ("fe80::1", "link-local"),
            ("64:ff9b::a00:1", "private"),
            ("2002:7f00:1::", "loopback"),
            ("::7f00:1", "IPv4-compatible (deprecated)"),
            ("ff02::1", "multicast"),
        ] {
            assert_eq!(class(a), Some(want), "{a}");
        }
        for public in [
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "8.8.8.8",
            "2606:4700::1111",
        ] {
            assert_eq!(class(public), None, "{public}");
        }
    }

    #[test]
    fn literal_internal_addresses_are_refused() {
        let h = Host::parse("127.0.0.1").unwrap();
        assert_eq!(
            resolve(&h, 80, None),
            Err(Unreachable::Internal {
                addr: "127.0.0.1".parse().unwrap(),
                class: "loopback"
            })
        );
        // `localhost` resolves (from /etc/hosts) to loopback only.
        let h = Host::parse("localhost").unwrap();
        assert!(matches!(
            resolve(&h, 80, None),
            Err(Unreachable::Internal {
                class: "loopback",
                ..
            })
        ));
    }
}
