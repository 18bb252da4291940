//! Plain HTTP forwarding: `GET http://host/path` becomes `GET /path` to `host`, with the
//! `Host` header set from the URI (so a shared server cannot be asked for another site than
//! the one the allowlist checked), hop-by-hop headers dropped, and `Connection: close` on
//! both legs: one request per client connection.

use super::dial::upstream;
use super::head::{self, Head, HeadError, Kind};
use super::shared::Shared;
use super::tunnel::pump;
use super::{reply, target};
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};

/// Limit on the upstream's response head.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Headers that describe one connection, not the message (RFC 9110, section 7.6.1), plus the
/// proxy's own credentials, which are never passed on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// Serves one absolute-URI request.
pub fn serve(shared: &Shared, id: u64, mut client: TcpStream, head: Head) {
    let Some((mut upstream, target)) =
        upstream(shared, id, &mut client, target::absolute(&head.target))
    else {
        return;
    };
    let mut out = format!("{} {} HTTP/1.{}\r\n", head.method, target.path, head.minor).into_bytes();
    let dropped = connection_tokens(&head);
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lower.as_str()) || dropped.contains(&lower) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "Host: {}\r\nConnection: close\r\n\r\n",
            target.host_header()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&head.rest);
    if upstream.write_all(&out).is_err() {
        return reply::send(
            &mut client,
            502,
            &format!(
                "sandbox: the proxy could not send the request to {}",
                target.host.authority(target.port)
            ),
        );
    }
    // A body still to come is copied as it arrives; without one, nothing more is read from
    // the client (a second request on this connection is not served).
    let body_pump = if has_body(&head) {
        match (client.try_clone(), upstream.try_clone()) {
            (Ok(c), Ok(u)) => std::thread::Builder::new()
                .name("proxy-body".into())
                .stack_size(64 * 1024)
                .spawn(move || pump(c, u))
                .ok(),
            _ => None,
        }
    } else {
        None
    };
    relay_response(&mut client, &mut upstream, &target);
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    if let Some(t) = body_pump {
        let _ = t.join();
    }
}

/// Passes the response on: interim (1xx) heads as they are, the final head with
/// `Connection: close`, then the body until the server closes.
fn relay_response(client: &mut TcpStream, upstream: &mut TcpStream, target: &target::Target) {
    let mut prefix = Vec::new();
    loop {
        let head = match head::read(upstream, Kind::Response, prefix, MAX_RESPONSE_HEAD, None) {
            Ok(h) => h,
            Err(HeadError::Empty) => {
                return reply::send(
                    client,
                    502,
                    &format!(
                        "sandbox: {} closed the connection without answering",
                        target.host.authority(target.port)
                    ),
                )
            }
            Err(HeadError::Malformed(m) | HeadError::TooLarge(m)) => {
                return reply::send(
                    client,
                    502,
                    &format!(
                        "sandbox: {} sent an invalid response: {m}",
                        target.host.authority(target.port)
                    ),
                )
            }
            Err(HeadError::TooSlow | HeadError::Io(_)) => return,
        };
        let interim = (100..200).contains(&head.status) && head.status != 101;
        let mut out =
            format!("HTTP/1.{} {} {}\r\n", head.minor, head.status, head.reason).into_bytes();
        for (name, value) in &head.headers {
            let lower = name.to_ascii_lowercase();
            if !interim
                && matches!(
                    lower.as_str(),
                    "connection" | "keep-alive" | "proxy-connection"
                )
            {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if !interim {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if interim {
            if client.write_all(&out).is_err() {
                return;
            }
            prefix = head.rest;
            continue;
        }
        out.extend_from_slice(&head.rest);
        if client.write_all(&out).is_err() {
            return;
        }
        let _ = io::copy(upstream, client);
        return;
    }
}

/// Header names the client's `Connection` header marks as hop-by-hop.
fn connection_tokens(head: &Head) -> Vec<String> {
    head.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        // The body's framing stays whatever the header says: dropping it would turn the
        // body into a second request to the server.
        .filter(|t| !t.is_empty() && t != "content-length" && t != "transfer-encoding")
        .collect()
}

/// Whether a request body follows the head.
fn has_body(head: &Head) -> bool {
    head.header("transfer-encoding").is_some()
        || head
            .header("content-length")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > head.rest.len() as u64)
}
