//! `sandbox mcp`: a Model Context Protocol server on stdio whose tools run commands under a
//! policy fixed when the server starts (docs/mcp.md).
//!
//! One thread reads newline-delimited JSON-RPC messages from stdin. `initialize`, `ping` and
//! `tools/list` are answered by it at once; each `tools/call` runs on a thread of its own (at
//! most [`inflight::MAX_IN_FLIGHT`] at a time), so a long `run` does not hold up a
//! `read_output` or a `signal`; answers are written whole, one line each, under a lock, in
//! the order the calls end. `notifications/cancelled` stops the call it names. A tool call is
//! a copy of the policy's exec request with the call's command in it, run by the one engine
//! (`exec`), or in the server's session once the session tools have started it (module
//! `procs`). Nothing but protocol messages is written on stdout; nothing is written on stderr
//! unless the server cannot start.

mod call;
mod inflight;
mod jsonrpc;
mod policy;
mod process_tools;
mod procs;
mod schema;
mod text;
mod tools;

pub use policy::{McpArgs, Policy};

use jsonrpc::{Incoming, Line};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::Mutex;

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
        // Not the locked handle: answers are written from the calls' threads.
        &mut std::io::stdout(),
    )
}

/// Serves `input` until it ends, answering on `output`. At the end of input the calls in
/// progress are answered, then the session and every process in it end. A client that stops
/// reading gets no more answers; the server ends with its input.
pub fn serve_on(
    policy: &Policy,
    input: &mut impl BufRead,
    output: &mut (impl Write + Send),
) -> Result<(), String> {
    let procs = procs::Procs::new(&policy.template);
    let out = Mutex::new(output);
    let send = |reply: &Value| {
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        // A client that stopped reading: its answers go nowhere, and its end of input ends
        // the server.
        let _ = jsonrpc::write(&mut *out, reply);
    };
    let flight = inflight::InFlight::default();
    let read = std::thread::scope(|scope| {
        let mut server = Server {
            policy,
            version: None,
        };
        let read = serve_lines(&mut server, input, &procs, &flight, &send, scope);
        // The client has gone: the session ends now, which also returns the calls that wait
        // on its processes (a write to a stdin nobody reads, a command running in it); the
        // scope then waits for every call to be answered.
        procs.end();
        read
    });
    // A `start` in progress at the end of input may have begun a session after the first end.
    procs.end();
    read
}

/// Reads and dispatches messages until the end of input: `tools/call` on a thread of `scope`,
/// the rest answered at once.
fn serve_lines<'scope, 'env: 'scope>(
    server: &mut Server<'env>,
    input: &mut impl BufRead,
    procs: &'env procs::Procs,
    flight: &'env inflight::InFlight,
    send: &'env (impl Fn(&Value) + Sync),
    scope: &'scope std::thread::Scope<'scope, 'env>,
) -> Result<(), String> {
    let policy = server.policy;
    loop {
        let msg = match jsonrpc::read_line(input, jsonrpc::MAX_LINE_BYTES)
            .map_err(|e| format!("reading stdin: {e}"))?
        {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                send(&jsonrpc::error(
                    &Value::Null,
                    jsonrpc::INVALID_REQUEST,
                    &format!("message longer than {} bytes", jsonrpc::MAX_LINE_BYTES),
                ));
                continue;
            }
            // Blank lines between messages are tolerated, as most transports do.
            Line::Text(t) if t.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Text(t) => jsonrpc::parse(&t),
        };
        match msg {
            Incoming::Request { id, method, params }
                if method == "tools/call" && server.version.is_some() =>
            {
                let Some(call) = flight.begin(&id) else {
                    send(&jsonrpc::error(
                        &id,
                        jsonrpc::INVALID_REQUEST,
                        "a call with this id is in progress: ids must be unique",
                    ));
                    continue;
                };
                let structured = structured(server.version.unwrap_or_default());
                scope.spawn(move || {
                    let ctx = call::Ctx {
                        policy,
                        procs,
                        call: &call,
                    };
                    let params = jsonrpc::object(&params);
                    let reply = match tools::call(&ctx, &params, structured) {
                        tools::Outcome::Result(r) => jsonrpc::result(&id, r),
                        tools::Outcome::Error(code, why) => jsonrpc::error(&id, code, &why),
                    };
                    if !call.is_cancelled() {
                        send(&reply);
                    }
                    flight.end(&id);
                });
            }
            Incoming::Notification { method, params } => {
                if method == "notifications/cancelled" {
                    if let Some(id) = params.get("requestId") {
                        flight.cancel(id);
                    }
                }
            }
            other => {
                if let Some(reply) = server.handle(other) {
                    send(&reply);
                }
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
    /// The answer to one message but a `tools/call` after `initialize` (run on a thread of
    /// its own) and notifications; `None` for responses.
    fn handle(&mut self, msg: Incoming) -> Option<Value> {
        let (id, method, params) = match msg {
            Incoming::Request { id, method, params } => (id, method, params),
            // Notifications are handled by the reader; the server sends no requests, so
            // a response is none of its business.
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
