//! `CONNECT host:port`: after the policy allows it, a byte tunnel in both directions (HTTPS,
//! or any TCP protocol), plus the byte pump the relay and the forwarder share.

use super::dial::upstream;
use super::head::Head;
use super::shared::Shared;
use super::target;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};

/// Serves one `CONNECT` request.
pub fn serve(shared: &Shared, id: u64, mut client: TcpStream, head: Head) {
    let Some((mut upstream, _)) = upstream(shared, id, &mut client, target::connect(&head.target))
    else {
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
        || upstream.write_all(&head.rest).is_err()
    {
        return;
    }
    splice(client, upstream);
}

/// Copies both ways until both directions end; each direction's end is passed on as a
/// half-close, so protocols that close one side first (TLS `close_notify`) finish cleanly.
pub fn splice(a: TcpStream, b: TcpStream) {
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let other = std::thread::Builder::new()
        .name("proxy-pump".into())
        .stack_size(64 * 1024)
        .spawn(move || pump(a2, b2));
    pump(b, a);
    if let Ok(t) = other {
        let _ = t.join();
    }
}

/// Copies `from` to `to` until `from` ends, then half-closes `to`.
pub fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
