//! The proxy's own answers: a status line and one plain-text line saying what happened and
//! what to change. The connection is closed after them.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// Longest time spent writing an answer to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The reason phrase of the statuses the proxy sends.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "Connection established",
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// The full response for `status` with `message` as its body (a newline is added).
pub fn response(status: u16, message: &str) -> Vec<u8> {
    let body = format!("{message}\n");
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nX-Sandbox-Proxy: {}\r\n\r\n{body}",
        reason_phrase(status),
        body.len(),
        if status == 403 { "refused" } else { "error" },
    )
    .into_bytes()
}

/// Sends the answer, ignoring a client that has gone, then closes the connection.
pub fn send(stream: &mut TcpStream, status: u16, message: &str) {
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.write_all(&response(status, message));
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Drain briefly so that unread request bytes do not turn the close into a reset that
    // could destroy the answer before the client reads it.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match std::io::Read::read(stream, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn answers_carry_their_length() {
        let r = String::from_utf8(super::response(403, "no")).unwrap();
        assert!(r.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{r}");
        assert!(r.contains("Content-Length: 3\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nno\n"), "{r}");
    }
}
