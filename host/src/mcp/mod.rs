//! `sandbox mcp`: a Model Context Protocol server on stdio whose tools run commands under a
//! policy fixed when the server starts (docs/mcp.md).
//!
//! One blocking loop reads newline-delimited JSON-RPC messages from stdin and answers each
//! request on stdout before reading the next: `initialize` (protocol-version negotiation),
//! `ping`, `tools/list` and `tools/call`; notifications get no answer. A tool call is a copy
//! of the policy's exec request with the call's command in it, run by the one engine
//! (`exec`), so the server confines exactly as `exec --json` does. Nothing but protocol
//! messages is written on stdout; nothing is written on stderr unless the server cannot
//! start.

mod jsonrpc;
mod policy;
mod schema;
mod text;
mod tools;

pub use policy::{McpArgs, Policy};

use jsonrpc::{Incoming, Line};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

/// The protocol versions spoken, newest first: the answer to a client asking for another.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The first version with `outputSchema`, `structuredContent` and tool titles.
const STRUCTURED_SINCE: &str = "2025-06-18";

/// Serves on stdin and stdout until stdin ends; `Err`: the flags' refusal, or a read error.
pub fn serve(args: &McpArgs) -> Result<(), String> {
    let policy = Policy::from_args(args)?;
    serve_on(
        &policy,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )
}

/// Serves `input` until it ends, answering on `output`. A client that stops reading ends the
/// server as its end of input does.
pub fn serve_on(
    policy: &Policy,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> Result<(), String> {
    let mut server = Server {
        policy,
        version: None,
    };
    loop {
        let reply = match jsonrpc::read_line(input, jsonrpc::MAX_LINE_BYTES)
            .map_err(|e| format!("reading stdin: {e}"))?
        {
            Line::Eof => return Ok(()),
            Line::TooLong => Some(jsonrpc::error(
                &Value::Null,
                jsonrpc::INVALID_REQUEST,
                &format!("message longer than {} bytes", jsonrpc::MAX_LINE_BYTES),
            )),
            // Blank lines between messages are tolerated, as most transports do.
            Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => None,
            Line::Text(t) => server.handle(jsonrpc::parse(&t)),
        };
        if let Some(reply) = reply {
            if jsonrpc::write(output, &reply).is_err() {
                return Ok(());
            }
        }
    }
}

/// The state of one connection: the policy and the negotiated version.
struct Server<'a> {
    policy: &'a Policy,
    /// Set by `initialize`; until then only `initialize` and `ping` are served.
    version: Option<&'static str>,
}

impl Server<'_> {
    /// The answer to one message; `None` for notifications and responses.
    fn handle(&mut self, msg: Incoming) -> Option<Value> {
        let (id, method, params) = match msg {
            Incoming::Request { id, method, params } => (id, method, params),
            // `notifications/initialized`, `notifications/cancelled` (calls run one at a time,
            // so one is answered before the next message is read) and the rest: nothing to do.
            Incoming::Notification { .. } | Incoming::Response => return None,
            Incoming::Invalid(id, code, why) => return Some(jsonrpc::error(&id, code, &why)),
        };
        let params = jsonrpc::object(&params);
        let answer = match (method.as_str(), self.version) {
            ("initialize", None) => self.initialize(&params),
            ("initialize", Some(_)) => {
                Err((jsonrpc::INVALID_REQUEST, "already initialized".to_string()))
            }
            ("ping", _) => Ok(json!({})),
            ("tools/list" | "tools/call", None) => Err((
                jsonrpc::INVALID_REQUEST,
                "not initialized: the first request must be initialize".to_string(),
            )),
            ("tools/list", Some(v)) => Ok(tools::list(self.policy, structured(v))),
            ("tools/call", Some(v)) => match tools::call(self.policy, &params, structured(v)) {
                tools::Outcome::Result(r) => Ok(r),
                tools::Outcome::Error(code, why) => Err((code, why)),
            },
            // Sessions add their methods' tools in `tools`, not methods here.
            (other, _) => Err((
                jsonrpc::METHOD_NOT_FOUND,
                format!(
                    "method `{}` not found (this server offers initialize, ping, tools/list, \
                     tools/call)",
                    crate::escape::text(&other.chars().take(64).collect::<String>())
                ),
            )),
        };
        Some(match answer {
            Ok(r) => jsonrpc::result(&id, r),
            Err((code, why)) => jsonrpc::error(&id, code, &why),
        })
    }

    /// `initialize`: the client's version when it is one of ours, else our newest (the client
    /// then decides whether it can go on, as the specification says).
    fn initialize(
        &mut self,
        params: &serde_json::Map<String, Value>,
    ) -> Result<Value, (i64, String)> {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or((
                jsonrpc::INVALID_PARAMS,
                "`protocolVersion` must be a string".to_string(),
            ))?;
        let version = PROTOCOL_VERSIONS
            .iter()
            .find(|v| **v == asked)
            .copied()
            .unwrap_or(PROTOCOL_VERSIONS[0]);
        self.version = Some(version);
        Ok(json!({
            "protocolVersion": version,
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": "sandbox", "version": env!("CARGO_PKG_VERSION") },
            "instructions": self.policy.summary(),
        }))
    }
}

/// Whether `version` has structured tool output (versions compare as dates).
fn structured(version: &str) -> bool {
    version >= STRUCTURED_SINCE
}
