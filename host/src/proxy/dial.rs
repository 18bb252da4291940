//! Deciding on a destination and connecting to it: the allowlist, then the addresses (pinned
//! for the port asked, or resolved with internal ones dropped), then a connect with a timeout. Every decision is
//! recorded; every refusal comes back as the status and the line the client will read.

use super::address::{self, Unreachable};
use super::config::Naming;
use super::domain::Host;
use super::shared::Shared;
use super::target::Target;
use std::io;
use std::net::TcpStream;

/// Why a destination was not reached: the HTTP status and the message for the client.
pub struct Refused {
    /// 403 (policy), 502 (resolution or connection failed) or 504 (timed out).
    pub status: u16,
    /// One line naming the destination, the reason and what to change.
    pub message: String,
}

/// The upstream connection of client request `id` for `target` (parsed from the request, or
/// why it could not be): a 400, or the refusal's status, goes to the client instead, and
/// `None` comes back. The connection (and the target) comes back tracked, so stopping the proxy closes it.
pub fn upstream(
    shared: &Shared,
    id: u64,
    client: &mut TcpStream,
    target: Result<Target, String>,
) -> Option<(TcpStream, Target)> {
    let target = match target {
        Ok(t) => t,
        Err(m) => {
            super::reply::send(
                client,
                400,
                &format!("sandbox: bad request to the proxy: {m}"),
            );
            return None;
        }
    };
    match dial(shared, &target) {
        Ok(s) => shared.track(id, &s).then_some((s, target)),
        Err(r) => {
            super::reply::send(client, r.status, &r.message);
            None
        }
    }
}

/// Connects to `target` if the policy allows it, recording the attempt.
pub fn dial(shared: &Shared, target: &Target) -> Result<TcpStream, Refused> {
    let c = &shared.config;
    let host = target.host.to_string();
    let port = target.port;
    if !c.allow.allows(&target.host) {
        // A registry's host is named with its preset too: the usual narrowest change.
        let preset = super::domain::preset_of(&target.host);
        let reason = match preset {
            Some(p) => format!("not in the allowed domains (registry preset @{p} has it)"),
            None => "not in the allowed domains".to_string(),
        };
        shared.refused(&host, port, reason);
        let also = preset.map_or_else(String::new, |p| format!(" (or the preset @{p})"));
        let change = match c.naming {
            Naming::Flags => format!("add --allow-domain {host}{also}"),
            Naming::Fields => format!("add \"{host}\" to allow_domains{also}"),
        };
        return Err(Refused {
            status: 403,
            message: format!(
                "sandbox: the proxy refused {host}:{port}: `{host}` is not an allowed domain; to allow it, {change}"
            ),
        });
    }
    // A pin holds for its port only: on another port the name is decided as if unpinned, and
    // the refusal says which ports it is pinned for.
    let addrs = match address::resolve(&target.host, port, c.pins.get(&target.host, port)) {
        Ok(a) => a,
        Err(Unreachable::Internal { addr, class }) => {
            let pinned = pinned_elsewhere(&c.pins, &target.host);
            shared.refused(&host, port, format!("resolves to {addr} ({class}){pinned}"));
            return Err(Refused {
                status: 403,
                message: internal_message(&target.host, port, addr, class, c.naming, &pinned),
            });
        }
        Err(Unreachable::NoAddress(e)) => {
            let e = format!(
                "does not resolve: {e}{}",
                pinned_elsewhere(&c.pins, &target.host)
            );
            shared.allowed(&host, port, Some(e.clone()));
            return Err(Refused {
                status: 502,
                message: format!("sandbox: the proxy could not reach {host}:{port}: `{host}` {e}"),
            });
        }
    };
    let mut last: Option<io::Error> = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, c.connect_timeout) {
            Ok(s) => {
                shared.allowed(&host, port, None);
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::other("no address"));
    let timed_out = matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    );
    let words = if timed_out {
        format!(
            "connecting timed out after {} s",
            c.connect_timeout.as_secs_f64()
        )
    } else {
        crate::refusal::io_reason(&e).to_lowercase()
    };
    shared.allowed(&host, port, Some(words.clone()));
    Err(Refused {
        status: if timed_out { 504 } else { 502 },
        message: format!("sandbox: the proxy could not reach {host}:{port}: {words}"),
    })
}

/// `" (pinned for port 8080 only)"` when `host` has pins for ports other than the one asked
/// (a request on an asked port never gets here), else nothing.
fn pinned_elsewhere(pins: &super::pins::Pins, host: &Host) -> String {
    let ports: Vec<String> = pins.ports(host).iter().map(u16::to_string).collect();
    match ports.len() {
        0 => String::new(),
        1 => format!(" (pinned for port {} only)", ports[0]),
        _ => format!(" (pinned for ports {} only)", ports.join(", ")),
    }
}

/// The line for a destination refused for its internal address, with the exact pin for the
/// port asked (a pin opens one port, so the suggestion names it).
fn internal_message(
    host: &Host,
    port: u16,
    addr: std::net::IpAddr,
    class: &str,
    naming: Naming,
    pinned: &str,
) -> String {
    let why = match host {
        Host::Ip(_) => format!("{addr} is a {class} address"),
        Host::Name(_) => format!("`{host}` resolves to {addr}, a {class} address"),
    };
    let change = match (host, naming) {
        (Host::Name(n), Naming::Flags) => format!(
            "if that is intended, pin it for this port with --resolve {}",
            super::pins::flag_value(n, port, addr)
        ),
        (Host::Name(n), Naming::Fields) => format!(
            "if that is intended, pin it for this port with \"resolve\": {{\"{n}:{port}\": \"{addr}\"}}"
        ),
        (Host::Ip(_), Naming::Flags) => {
            "a port of the host's loopback is reachable with --allow-host-port PORT".to_string()
        }
        (Host::Ip(_), Naming::Fields) => {
            "a port of the host's loopback is reachable with host_ports".to_string()
        }
    };
    format!(
        "sandbox: the proxy refused {}: {why}, which allowed names may not reach{pinned}; {change}",
        host.authority(port)
    )
}
