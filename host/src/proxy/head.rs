//! Reading a message head (request line or status line, then headers) with bounds: at most
//! `max_bytes`, at most [`MAX_HEADERS`] headers, complete within a deadline. A client that
//! sends garbage, too much or too slowly gets a precise error instead of holding a thread.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Most headers in one head.
pub const MAX_HEADERS: usize = 100;

/// A parsed head: the first line's parts, the headers, and the bytes read past the head (the
/// start of a body, or a TLS hello sent right after `CONNECT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// Request method (requests) or empty (responses).
    pub method: String,
    /// Request target (requests) or empty (responses).
    pub target: String,
    /// Status code (responses) or 0 (requests).
    pub status: u16,
    /// Reason phrase (responses).
    pub reason: String,
    /// HTTP minor version: 0 or 1.
    pub minor: u8,
    /// Header names and values, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Bytes received after the head.
    pub rest: Vec<u8>,
}

impl Head {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// Why a head could not be read.
#[derive(Debug)]
pub enum HeadError {
    /// The peer closed before sending anything.
    Empty,
    /// Not HTTP, or malformed.
    Malformed(String),
    /// Longer than the limit, or too many headers.
    TooLarge(String),
    /// Not complete within the deadline.
    TooSlow,
    /// The connection failed.
    Io(io::Error),
}

/// Which kind of head to parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A request from a client.
    Request,
    /// A response from a server.
    Response,
}

/// Reads one head from `stream`, `prefix` being bytes already received. `deadline` bounds the
/// whole head (a client trickling a byte a second does not reset it); `None` waits.
pub fn read(
    stream: &mut TcpStream,
    kind: Kind,
    prefix: Vec<u8>,
    max_bytes: usize,
    deadline: Option<Instant>,
) -> Result<Head, HeadError> {
    let mut buf = prefix;
    let mut chunk = [0u8; 8192];
    // Parse when a line may have ended (and on the first bytes, to refuse garbage early):
    // a client trickling bytes one by one costs no repeated parsing of the whole head.
    let mut worth_parsing = !buf.is_empty();
    loop {
        if worth_parsing {
            if let Some(head) = parse(kind, &buf, max_bytes)? {
                return Ok(head);
            }
        }
        if buf.len() >= max_bytes {
            return Err(HeadError::TooLarge(format!(
                "the head is longer than {max_bytes} bytes"
            )));
        }
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(HeadError::TooSlow);
            }
            stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .map_err(HeadError::Io)?;
        }
        let want = chunk.len().min(max_bytes - buf.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) if buf.is_empty() => return Err(HeadError::Empty),
            Ok(0) => return Err(HeadError::Malformed("the head ends early".into())),
            Ok(n) => {
                worth_parsing = buf.is_empty() || chunk[..n].contains(&b'\n');
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::TooSlow)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HeadError::Io(e)),
        }
    }
}

/// Parses `buf` as a head; `Ok(None)` when more bytes are needed.
pub fn parse(kind: Kind, buf: &[u8], max_bytes: usize) -> Result<Option<Head>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let too_many = || HeadError::TooLarge(format!("more than {MAX_HEADERS} headers"));
    let malformed = |e: httparse::Error| HeadError::Malformed(format!("not HTTP ({e})"));
    let (len, mut head, headers) = match kind {
        Kind::Request => {
            let mut r = httparse::Request::new(&mut slots);
            let status = match r.parse(buf) {
                Err(httparse::Error::TooManyHeaders) => return Err(too_many()),
                Err(e) => return Err(malformed(e)),
                Ok(s) => s,
            };
            let httparse::Status::Complete(len) = status else {
                return Ok(None);
            };
            let head = Head {
                method: r.method.unwrap_or_default().to_string(),
                target: r.path.unwrap_or_default().to_string(),
                status: 0,
                reason: String::new(),
                minor: r.version.unwrap_or(1),
                headers: Vec::new(),
                rest: Vec::new(),
            };
            (len, head, copy_headers(r.headers))
        }
        Kind::Response => {
            let mut r = httparse::Response::new(&mut slots);
            let status = match r.parse(buf) {
                Err(httparse::Error::TooManyHeaders) => return Err(too_many()),
                Err(e) => return Err(malformed(e)),
                Ok(s) => s,
            };
            let httparse::Status::Complete(len) = status else {
                return Ok(None);
            };
            let head = Head {
                method: String::new(),
                target: String::new(),
                status: r.code.unwrap_or_default(),
                reason: r.reason.unwrap_or_default().to_string(),
                minor: r.version.unwrap_or(1),
                headers: Vec::new(),
                rest: Vec::new(),
            };
            (len, head, copy_headers(r.headers))
        }
    };
    if len > max_bytes {
        return Err(HeadError::TooLarge(format!(
            "the head is longer than {max_bytes} bytes"
        )));
    }
    head.headers = headers;
    head.rest = buf[len..].to_vec();
    Ok(Some(head))
}

fn copy_headers(h: &[httparse::Header<'_>]) -> Vec<(String, Vec<u8>)> {
    h.iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse_with_leftover() {
        let buf = b"CONNECT a.com:443 HTTP/1.1\r\nHost: a.com:443\r\n\r\n\x16\x03\x01";
        let h = parse(Kind::Request, buf, 1024).unwrap().unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str()),
            ("CONNECT", "a.com:443")
        );
        assert_eq!(h.header("host"), Some(&b"a.com:443"[..]));
        assert_eq!(h.rest, b"\x16\x03\x01");
        assert!(
            parse(Kind::Request, b"GET http://a.com/ HTTP/1.1\r\nHo", 1024)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn garbage_and_excess_are_errors() {
        assert!(matches!(
            parse(Kind::Request, b"\x16\x03\x01\x02\x00\r\n\r\n", 1024),
            Err(HeadError::Malformed(_))
        ));
        let mut many = b"GET http://a.com/ HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse(Kind::Request, &many, 1 << 20),
            Err(HeadError::TooLarge(_))
        ));
        let long = format!(
            "GET http://a.com/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "y".repeat(2000)
        );
        assert!(matches!(
            parse(Kind::Request, long.as_bytes(), 1024),
            Err(HeadError::TooLarge(_))
        ));
    }

    #[test]
    fn response_heads_parse() {
        let h = parse(
            Kind::Response,
            b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody",
            1024,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (h.status, h.minor, h.rest.as_slice()),
            (200, 0, &b"body"[..])
        );
    }
}
