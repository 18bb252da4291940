//! JSON-RPC 2.0 over newline-delimited stdio, the framing of MCP's stdio transport: reading
//! one bounded line, telling requests, notifications and responses apart, and writing
//! results and errors.
//!
//! Hand-written over serde_json rather than taken from a crate: the whole protocol surface
//! used here is five methods over one reader thread (docs/mcp.md, "Why no MCP crate").

use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;

/// Longest message line accepted, in bytes: an exec request's own bound (8 MiB, room for
/// 4 MiB of stdin text) plus the envelope.
pub const MAX_LINE_BYTES: usize = crate::exec::json::MAX_REQUEST_BYTES + 64 * 1024;

/// One message read from the client.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one response carrying `id`.
    Request {
        /// The client's id, a string or a number, echoed as given.
        id: Value,
        /// The method's name.
        method: String,
        /// The parameters (`null` when absent).
        params: Value,
    },
    /// A notification (no `id`): never answered.
    Notification {
        /// The method's name.
        method: String,
        /// The parameters (`null` when absent; not checked: a notification is never
        /// answered).
        params: Value,
    },
    /// A response to a request of ours; the server sends none, so it is ignored.
    Response,
    /// Not a message: answered with this error (`id` when one could be read, else `null`).
    Invalid(Value, i64, String),
}

/// What [`read_line`] found.
pub enum Line {
    /// One line, without its newline.
    Text(Vec<u8>),
    /// A line longer than [`MAX_LINE_BYTES`]; it was read to its end and dropped.
    TooLong,
    /// End of input.
    Eof,
}

/// Reads one line of at most `max` bytes; a longer one is consumed and reported as such, so
/// that the next message starts where it should.
pub fn read_line(input: &mut impl BufRead, max: usize) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Text(line),
            });
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        let used = done.unwrap_or(buf.len());
        input.consume(used);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Text(line)
            });
        }
    }
}

/// Classifies one line. Objects with a duplicate key at any depth are refused as a parse
/// error: `{"argv": A, "argv": B}` means different things to different parsers.
pub fn parse(line: &[u8]) -> Incoming {
    let value = match serde_json::from_slice::<crate::exec::Strict>(line) {
        Ok(crate::exec::Strict(v)) => v,
        Err(e) => return Incoming::Invalid(Value::Null, PARSE_ERROR, format!("parse error: {e}")),
    };
    let Value::Object(mut obj) = value else {
        let what = if value.is_array() {
            "batches are not supported: send one message per line"
        } else {
            "a message must be a JSON object"
        };
        return Incoming::Invalid(Value::Null, INVALID_REQUEST, what.to_string());
    };
    let id = obj.remove("id");
    // The id is echoed only when it is one the client could match (a string or a number).
    let echo = match &id {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
    let invalid = |why: &str| Incoming::Invalid(echo.clone(), INVALID_REQUEST, why.to_string());
    if obj.get("jsonrpc") != Some(&Value::from("2.0")) {
        return invalid("`jsonrpc` must be \"2.0\"");
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Incoming::Response
        }
        None => return invalid("`method` is missing"),
        Some(_) => return invalid("`method` must be a string"),
    };
    let params = obj.remove("params").unwrap_or(Value::Null);
    match id {
        // A notification is never answered, not even to say its params are wrong.
        None => Incoming::Notification { method, params },
        Some(Value::String(_) | Value::Number(_)) if !params.is_object() && !params.is_null() => {
            Incoming::Invalid(
                echo,
                INVALID_PARAMS,
                "`params` must be an object".to_string(),
            )
        }
        Some(Value::String(_) | Value::Number(_)) => Incoming::Request {
            id: echo,
            method,
            params,
        },
        Some(_) => invalid("`id` must be a string or a number"),
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Writes one message as one line and flushes it: the client reads line by line.
pub fn write(out: &mut impl Write, message: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    text.push(b'\n');
    out.write_all(&text)?;
    out.flush()
}

/// The parameters as an object (`null` reads as an empty one).
pub fn object(params: &Value) -> Map<String, Value> {
    params.as_object().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let p = |s: &str| parse(s.as_bytes());
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: Value::Null
            }
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification {
                method: "notifications/initialized".into(),
                params: Value::Null
            }
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Response
        );
        assert_eq!(
            p(r#"{"jsonrpc":"2.0","method":"notifications/x","params":[1]}"#),
            Incoming::Notification {
                method: "notifications/x".into(),
                params: json!([1])
            }
        );
        let code = |s: &str| match p(s) {
            Incoming::Invalid(_, c, _) => c,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(code("{"), PARSE_ERROR);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#),
            PARSE_ERROR
        );
        assert_eq!(code("[]"), INVALID_REQUEST);
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
            INVALID_PARAMS
        );
    }

    #[test]
    fn an_overlong_line_is_dropped_whole() {
        let mut input = std::io::Cursor::new(b"0123456789\nok\nlast".to_vec());
        let mut next = || match read_line(&mut input, 4).unwrap() {
            Line::Text(t) => String::from_utf8(t).unwrap(),
            Line::TooLong => "too long".into(),
            Line::Eof => "eof".into(),
        };
        assert_eq!(next(), "too long");
        assert_eq!(next(), "ok");
        assert_eq!(next(), "last");
        assert_eq!(next(), "eof");
    }
}
