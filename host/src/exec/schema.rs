//! The JSON form of a [`Request`]: its one deserializer, shared by `sandbox exec --json`,
//! `sandbox serve` and anyone who deserializes a `Request` with serde, so that every front end
//! accepts and refuses the same text with the same messages. Serialization is derived from the
//! struct itself; a test checks that what is serialized reads back as the same request, field
//! for field, so the two directions cannot drift.

use super::request::{Limits, Refusal, Request};
use crate::sandbox::StaticBinaryAction;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

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
    "allow_broad_workspace",
    "writable_paths",
    "deny_read",
    "connect_ports",
    "secret_env",
    "redact_secrets",
    "allow_root",
    "on_violation",
    "allow",
    "deny",
    "profile_file",
    "isolation",
    "read_only_paths",
    "allow_unix_sockets",
    "allow_control_files",
    "network",
    "allow_domains",
    "resolve",
    "host_ports",
    "home",
];

const LIMIT_FIELDS: &[&str] = &[
    "cpu_seconds",
    "memory_bytes",
    "fsize_bytes",
    "nofile",
    "processes",
];

impl Request {
    /// Parses a request from JSON text, naming the field of the first problem: the same
    /// checks and messages as `sandbox exec --json` and `sandbox serve` give. Objects with a
    /// duplicate key (at any depth) are refused rather than resolved one way or the other.
    ///
    /// ```
    /// use sandbox_host::exec::Request;
    ///
    /// let req = Request::from_json(br#"{"argv": ["/bin/echo", "hi"], "timeout_s": 5}"#).unwrap();
    /// assert_eq!(req.argv, ["/bin/echo", "hi"]);
    /// assert_eq!(req.timeout_s, 5.0);
    ///
    /// let bad = Request::from_json(br#"{"argv": ["/bin/true"], "timeout": 5}"#).unwrap_err();
    /// assert_eq!(bad.field, "timeout");
    /// assert!(bad.reason.starts_with("unknown field"));
    /// ```
    pub fn from_json(input: &[u8]) -> Result<Request, Refusal> {
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
        Request::from_value(value)
    }

    /// [`Request::from_json`] for JSON already read (without duplicate keys).
    fn from_value(value: Value) -> Result<Request, Refusal> {
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
                                return Err(Refusal::new(
                                    format!("env.{k}"),
                                    "value must be a string",
                                ))
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
        if let Some(m) =
            optional::<u64>(&obj, "max_output_bytes", "must be a non-negative integer")?
        {
            req.max_output_bytes = m;
        }
        if let Some(p) = optional::<String>(&obj, "profile", "must be a string")? {
            req.profile = p;
        }
        if let Some(s) = optional::<StaticBinaryAction>(
            &obj,
            "static_binary",
            "must be \"block\", \"warn\", \"allow\" or \"confine\"",
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
        req.workspace =
            optional::<String>(&obj, "workspace", "must be a string (an absolute path)")?;
        if let Some(b) = optional::<bool>(&obj, "allow_broad_workspace", "must be true or false")? {
            req.allow_broad_workspace = b;
        }
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
        if let Some(b) = optional::<bool>(&obj, "allow_root", "must be true or false")? {
            req.allow_root = b;
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
        req.allow_unix_sockets =
            optional::<Vec<String>>(&obj, "allow_unix_sockets", paths)?.unwrap_or_default();
        req.allow_control_files = optional::<Vec<String>>(
            &obj,
            "allow_control_files",
            "must be a list of strings (entries of `sandbox profiles control-files`)",
        )?
        .unwrap_or_default();
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
            "must be an object mapping NAME:PORT to an address ({\"api.example.com:8080\": \"127.0.0.1\"})",
        )?
        .unwrap_or_default();
        req.host_ports = optional::<Vec<u16>>(
            &obj,
            "host_ports",
            "must be a list of port numbers (1 to 65535)",
        )?
        .unwrap_or_default();
        if let Some(h) = optional::<super::home::Mode>(
            &obj,
            "home",
            "must be \"persistent\", \"private\" or \"real\"",
        )? {
            // The request's own `HOME` decides the job's home and no sandbox home is made
            // (request.rs): asking for one as well would be ignored without a word.
            if req.env.contains_key("HOME") {
                return Err(Refusal::new(
                    "home",
                    "the request's env sets HOME, which is then the job's home (no sandbox \
                     home is made): drop \"home\" or env.HOME",
                ));
            }
            req.home = h;
        }
        Ok(req)
    }
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
pub(crate) struct Strict(pub(crate) Value);

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

impl<'de> Deserialize<'de> for Request {
    /// The checks of [`Request::from_json`]; the error reads `field: reason`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Request, D::Error> {
        let Strict(value) = Strict::deserialize(d)?;
        Request::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Limits {
    /// The checks of a request's `limits` object; the error reads `limits.field: reason`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
        let Strict(value) = Strict::deserialize(d)?;
        limits(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::OnViolation;

    /// `Limits` read alone goes through the request's checks: same fields, same messages,
    /// and what it writes reads back.
    #[test]
    fn limits_alone_has_the_request_schema() {
        let l: Limits = serde_json::from_str(r#"{"nofile": 64, "processes": 10}"#).unwrap();
        assert_eq!(
            (l.nofile, l.processes, l.cpu_seconds),
            (Some(64), Some(10), None)
        );
        let back: Limits = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back, l);
        for (text, alone) in [
            (r#"{"bogus": 1}"#, "limits.bogus: unknown field"),
            (
                r#"{"nofile": -1}"#,
                "limits.nofile: must be a non-negative integer",
            ),
            (r#"{"nofile": 1, "nofile": 2}"#, "duplicate"),
            ("[]", "limits: must be an object"),
        ] {
            let e = serde_json::from_str::<Limits>(text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(alone), "{text}: {e}");
            let req = format!(r#"{{"argv": ["/bin/true"], "limits": {text}}}"#);
            let e2 = Request::from_json(req.as_bytes()).unwrap_err().to_string();
            assert!(e2.contains(alone), "{req}: {e2}");
        }
    }

    /// A request with every field away from its default.
    fn full() -> Request {
        let mut r = Request::new(["/bin/echo", "hi"]);
        r.cwd = Some("/tmp".into());
        r.env.insert("A".into(), "b".into());
        r.timeout_s = 7.5;
        r.max_output_bytes = 2048;
        r.profile = "shell".into();
        r.static_binary = StaticBinaryAction::Warn;
        r.require_sandbox = true;
        r.stdin = Some("in".into());
        r.limits = Limits {
            cpu_seconds: Some(1),
            memory_bytes: Some(2),
            fsize_bytes: Some(3),
            nofile: Some(4),
            processes: Some(5),
        };
        r.landlock = crate::landlock::Mode::Required;
        r.workspace = Some("/tmp".into());
        r.allow_broad_workspace = true;
        r.writable_paths = vec!["/tmp/w".into()];
        r.deny_read = vec!["/tmp/d".into()];
        r.connect_ports = Some(vec![443]);
        r.secret_env = vec!["A".into()];
        r.redact_secrets = true;
        r.on_violation = OnViolation::Kill;
        r.allow = vec!["socket".into()];
        r.deny = vec!["ptrace".into()];
        r.profile_file = Some("/tmp/p.toml".into());
        r.isolation = crate::exec::isolation::Mode::Off;
        r.read_only_paths = vec!["/tmp/r".into()];
        r.network = Some(crate::network::Mode::Proxy);
        r.allow_domains = vec!["example.com".into()];
        r.resolve
            .insert("example.com:8080".into(), "127.0.0.1".into());
        r.host_ports = vec![8080];
        r.home = crate::exec::home::Mode::Real;
        r
    }

    /// Each value a static-binary refusal names is one the field takes, and it names every
    /// value the field takes (the match fails to compile when an action is added).
    #[test]
    fn the_static_binary_refusal_names_every_action() {
        let bad = Request::from_json(br#"{"argv": ["/bin/true"], "static_binary": "maybe"}"#)
            .unwrap_err();
        assert_eq!(bad.field, "static_binary");
        let named: Vec<&str> = bad.reason.split('"').skip(1).step_by(2).collect();
        let name = |a: StaticBinaryAction| match a {
            StaticBinaryAction::Block => "block",
            StaticBinaryAction::Warn => "warn",
            StaticBinaryAction::Allow => "allow",
            StaticBinaryAction::Confine => "confine",
        };
        for a in [
            StaticBinaryAction::Block,
            StaticBinaryAction::Warn,
            StaticBinaryAction::Allow,
            StaticBinaryAction::Confine,
        ] {
            assert!(named.contains(&name(a)), "{} lacks {}", bad.reason, name(a));
        }
        for n in named {
            let input = format!(r#"{{"argv": ["/bin/true"], "static_binary": "{n}"}}"#);
            let r = Request::from_json(input.as_bytes()).unwrap();
            assert_eq!(name(r.static_binary), n);
        }
    }

    #[test]
    fn what_is_serialized_reads_back_the_same() {
        for r in [Request::new(["/bin/true"]), full()] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(Request::from_json(text.as_bytes()).unwrap(), r, "{text}");
            assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r, "{text}");
        }
    }

    #[test]
    fn the_field_list_is_the_serialized_one() {
        let Value::Object(obj) = serde_json::to_value(full()).unwrap() else {
            panic!("an object")
        };
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        let mut fields = FIELDS.to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
        let Value::Object(limits) = serde_json::to_value(full().limits).unwrap() else {
            panic!("an object")
        };
        let mut keys: Vec<&str> = limits.keys().map(String::as_str).collect();
        let mut fields = LIMIT_FIELDS.to_vec();
        keys.sort_unstable();
        fields.sort_unstable();
        assert_eq!(keys, fields);
    }

    #[test]
    fn serde_gives_the_front_ends_messages() {
        let e = serde_json::from_str::<Request>(r#"{"argv": ["/bin/true"], "timeout_s": "x"}"#)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("timeout_s: must be a number of seconds"),
            "{e}"
        );
        let e =
            serde_json::from_str::<Request>(r#"{"argv": ["/bin/true"], "argv": []}"#).unwrap_err();
        assert!(e.to_string().contains("duplicate key `argv`"), "{e}");
    }
}
