//! `sandbox exec --json`: one request as JSON in, one result (or one error) as JSON out.
//!
//! Every refusal is `{"error": {"field": F, "reason": R}}` with exit status 125 (126 or 127, and
//! `exit_code` in the error, for a program that cannot be executed or is not found); a request that
//! ran gives its result with exit status 0, whatever the program did.

use super::request::{Limits, Refusal, Request};
use super::run::{exec, ExecError};
use crate::sandbox::StaticBinaryAction;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The exit status of `sandbox exec --json` when the request did not run.
pub const REFUSED_STATUS: i32 = 125;
/// Largest request accepted, in bytes (stdin text may be 4 MiB; argv and env fit in the rest).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// The request's fields, for "unknown field" messages.
pub const FIELDS: &[&str] = &[
    "argv",
    "cwd",
    "env",
    "timeout_s",
    "max_output_bytes",
    "profile",
    "static_binary",
    "require_sandbox",
    "stdin",
    "limits",
    "landlock",
    "workspace",
    "writable_paths",
    "deny_read",
    "connect_ports",
    "secret_env",
    "redact_secrets",
    "on_violation",
    "allow",
    "deny",
    "profile_file",
    "isolation",
    "read_only_paths",
    "network",
    "allow_domains",
    "resolve",
    "host_ports",
];

const LIMIT_FIELDS: &[&str] = &[
    "cpu_seconds",
    "memory_bytes",
    "fsize_bytes",
    "nofile",
    "processes",
];

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

/// Parses a request, naming the field of the first problem.
pub fn parse(input: &[u8]) -> Result<Request, Refusal> {
    if input.len() > MAX_REQUEST_BYTES {
        return Err(Refusal::new(
            "request",
            format!(
                "larger than {MAX_REQUEST_BYTES} bytes ({} bytes)",
                input.len()
            ),
        ));
    }
    let Strict(value) = serde_json::from_slice(input)
        .map_err(|e| Refusal::new("request", format!("malformed JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Refusal::new("request", "must be a JSON object"));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            return Err(Refusal::new(
                key.clone(),
                format!("unknown field (known fields: {})", FIELDS.join(", ")),
            ));
        }
    }
    let argv = match obj.get("argv") {
        None => {
            return Err(Refusal::new(
                "argv",
                "missing (a non-empty list of strings)",
            ))
        }
        Some(Value::Array(items)) => {
            let mut argv = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => argv.push(s.clone()),
                    _ => return Err(Refusal::new(format!("argv[{i}]"), "must be a string")),
                }
            }
            argv
        }
        Some(_) => return Err(Refusal::new("argv", "must be a non-empty list of strings")),
    };
    let mut req = Request::new(argv);
    req.cwd = optional::<String>(&obj, "cwd", "must be a string (an absolute path)")?;
    if let Some(env) = obj.get("env") {
        req.env = match env {
            Value::Null => BTreeMap::new(),
            Value::Object(m) => {
                let mut out = BTreeMap::new();
                for (k, v) in m {
                    match v {
                        Value::String(s) => {
                            out.insert(k.clone(), s.clone());
                        }
                        _ => {
                            return Err(Refusal::new(format!("env.{k}"), "value must be a string"))
                        }
                    }
                }
                out
            }
            _ => return Err(Refusal::new("env", "must be an object of string values")),
        };
    }
    if let Some(t) = optional::<f64>(&obj, "timeout_s", "must be a number of seconds")? {
        req.timeout_s = t;
    }
    if let Some(m) = optional::<u64>(&obj, "max_output_bytes", "must be a non-negative integer")? {
        req.max_output_bytes = m;
    }
    if let Some(p) = optional::<String>(&obj, "profile", "must be a string")? {
        req.profile = p;
    }
    if let Some(s) = optional::<StaticBinaryAction>(
        &obj,
        "static_binary",
        "must be \"block\", \"warn\" or \"allow\"",
    )? {
        req.static_binary = s;
    }
    if let Some(b) = optional::<bool>(&obj, "require_sandbox", "must be true or false")? {
        req.require_sandbox = b;
    }
    req.stdin = optional::<String>(&obj, "stdin", "must be a string")?;
    if let Some(l) = obj.get("limits") {
        req.limits = limits(l)?;
    }
    if let Some(m) = optional::<crate::landlock::Mode>(
        &obj,
        "landlock",
        "must be \"required\", \"preferred\" or \"off\"",
    )? {
        req.landlock = m;
    }
    req.workspace = optional::<String>(&obj, "workspace", "must be a string (an absolute path)")?;
    let paths = "must be a list of strings (absolute paths)";
    req.writable_paths =
        optional::<Vec<String>>(&obj, "writable_paths", paths)?.unwrap_or_default();
    req.deny_read = optional::<Vec<String>>(&obj, "deny_read", paths)?.unwrap_or_default();
    req.connect_ports = optional::<Vec<u16>>(
        &obj,
        "connect_ports",
        "must be a list of port numbers (1 to 65535)",
    )?;
    req.secret_env = optional::<Vec<String>>(
        &obj,
        "secret_env",
        "must be a list of strings (names of variables in `env`)",
    )?
    .unwrap_or_default();
    if let Some(b) = optional::<bool>(&obj, "redact_secrets", "must be true or false")? {
        req.redact_secrets = b;
    }
    if let Some(o) = optional::<super::request::OnViolation>(
        &obj,
        "on_violation",
        "must be \"report\" or \"kill\"",
    )? {
        req.on_violation = o;
    }
    let entries =
        "must be a list of strings (list-grammar entries such as \"socket\" or \"@network\")";
    req.allow = optional::<Vec<String>>(&obj, "allow", entries)?.unwrap_or_default();
    req.deny = optional::<Vec<String>>(&obj, "deny", entries)?.unwrap_or_default();
    req.profile_file =
        optional::<String>(&obj, "profile_file", "must be a string (an absolute path)")?;
    if let Some(m) = optional::<super::isolation::Mode>(
        &obj,
        "isolation",
        "must be \"required\", \"preferred\" or \"off\"",
    )? {
        req.isolation = m;
    }
    req.read_only_paths =
        optional::<Vec<String>>(&obj, "read_only_paths", paths)?.unwrap_or_default();
    req.network = optional::<crate::network::Mode>(
        &obj,
        "network",
        "must be \"host\", \"none\" or \"proxy\"",
    )?;
    req.allow_domains = optional::<Vec<String>>(
        &obj,
        "allow_domains",
        "must be a list of strings (domain names, `*.example.com` for subdomains)",
    )?
    .unwrap_or_default();
    req.resolve = optional::<BTreeMap<String, String>>(
        &obj,
        "resolve",
        "must be an object mapping names to addresses ({\"api.example.com\": \"127.0.0.1\"})",
    )?
    .unwrap_or_default();
    req.host_ports = optional::<Vec<u16>>(
        &obj,
        "host_ports",
        "must be a list of port numbers (1 to 65535)",
    )?
    .unwrap_or_default();
    Ok(req)
}

fn limits(v: &Value) -> Result<Limits, Refusal> {
    let m = match v {
        Value::Null => return Ok(Limits::default()),
        Value::Object(m) => m,
        _ => return Err(Refusal::new("limits", "must be an object")),
    };
    for key in m.keys() {
        if !LIMIT_FIELDS.contains(&key.as_str()) {
            return Err(Refusal::new(
                format!("limits.{key}"),
                format!("unknown field (known fields: {})", LIMIT_FIELDS.join(", ")),
            ));
        }
    }
    let get = |k: &str| -> Result<Option<u64>, Refusal> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x.as_u64().map(Some).ok_or_else(|| {
                Refusal::new(format!("limits.{k}"), "must be a non-negative integer")
            }),
        }
    };
    Ok(Limits {
        cpu_seconds: get("cpu_seconds")?,
        memory_bytes: get("memory_bytes")?,
        fsize_bytes: get("fsize_bytes")?,
        nofile: get("nofile")?,
        processes: get("processes")?,
    })
}

fn optional<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<T>, Refusal> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|_| Refusal::new(key, what)),
    }
}

/// A JSON value whose objects have no duplicate keys at any depth: `{"argv": A, "argv": B}`
/// means different things to different parsers, so it is refused rather than resolved.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{k}`"
                )));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}
