//! `sandbox exec --json`: one request as JSON in, one result (or one error) as JSON out.
//!
//! Every refusal is `{"error": {"field": F, "reason": R}}` with exit status 125 (126 or 127, and
//! `exit_code` in the error, for a program that cannot be executed or is not found); a request that
//! ran gives its result with exit status 0, whatever the program did.

use super::request::{Refusal, Request};
use super::result::ExecError;
use super::run::exec;
use super::schema::Strict;
use serde_json::Value;

pub use super::schema::{FIELDS, MAX_REQUEST_BYTES};

/// The exit status of `sandbox exec --json` when the request did not run.
pub const REFUSED_STATUS: i32 = 125;

/// Runs one JSON request; returns the JSON to print (one line) and the exit status.
pub fn run_json(input: &[u8]) -> (String, i32) {
    let req = match parse(input) {
        Ok(r) => r,
        Err(r) => {
            tracing::info!(target: "sandbox::exec", outcome = "refused", field = %r.field, reason = %r.reason, "exec");
            return (error_json(&r.field, &r.reason), REFUSED_STATUS);
        }
    };
    match exec(&req) {
        Ok(result) => match serde_json::to_string(&result) {
            Ok(s) => (s, 0),
            Err(e) => (
                error_json("result", &format!("cannot encode the result: {e}")),
                REFUSED_STATUS,
            ),
        },
        Err(e) => (error_of(&e), e.exit_code().unwrap_or(REFUSED_STATUS)),
    }
}

/// The error object; a program that could not be started also carries the shell's status
/// (`exit_code` 126 or 127), which is then the command's exit status too.
fn error_of(e: &ExecError) -> String {
    let mut text = error_json(e.field(), &e.reason());
    if let Some(code) = e.exit_code() {
        // `...}}` becomes `...,"exit_code":N}}`: the same order as in `serve`'s lines.
        text.truncate(text.len() - 2);
        text.push_str(&format!(",\"exit_code\":{code}}}}}"));
    }
    text
}

/// `{"error":{"field":...,"reason":...}}`.
pub fn error_json(field: &str, reason: &str) -> String {
    serde_json::json!({ "error": { "field": field, "reason": reason } }).to_string()
}

/// Longest `id` accepted by [`parse_with_id`], in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Parses a request line of `sandbox serve`: a request with one more field, `id`, a non-empty
/// string that the result line carries back. Returns the id whenever it could be read (also
/// when the rest of the request is refused), so that an error line can name its request.
pub fn parse_with_id(input: &[u8]) -> (Option<String>, Result<Request, Refusal>) {
    let parsed = (input.len() <= MAX_REQUEST_BYTES).then(|| serde_json::from_slice(input));
    let mut obj = match parsed {
        Some(Ok(Strict(Value::Object(obj)))) => obj,
        // Too large, malformed, not an object: the same refusal as `exec --json` gives.
        _ => return (None, parse(input)),
    };
    let id = match obj.remove("id") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID_BYTES => s,
        None => {
            let r = Refusal::new("id", "missing (a string naming the request in its result)");
            return (None, Err(r));
        }
        Some(_) => {
            let r = Refusal::new(
                "id",
                format!("must be a non-empty string of at most {MAX_ID_BYTES} bytes"),
            );
            return (None, Err(r));
        }
    };
    // The object was read strictly (no duplicate key at any depth), so writing it back and
    // parsing it as an exec request refuses and accepts exactly what the line holds.
    let res = serde_json::to_vec(&Value::Object(obj))
        .map_err(|e| Refusal::new("request", format!("malformed JSON: {e}")))
        .and_then(|bytes| parse(&bytes));
    (Some(id), res)
}

/// Parses a request, naming the field of the first problem (see [`Request::from_json`]).
pub fn parse(input: &[u8]) -> Result<Request, Refusal> {
    Request::from_json(input)
}
