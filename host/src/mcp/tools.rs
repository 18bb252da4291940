//! The tools `sandbox mcp` offers: `run` (a program and its arguments, no shell) and `shell`
//! (one line for `/bin/sh -c`), their schemas, the checks of their arguments, and the result
//! an agent reads.
//!
//! A call's arguments can only narrow the fixed policy: besides the command they take text
//! for stdin and a shorter timeout, and every other key is refused by name. The policy's own
//! fields are not arguments at all, so no value of a call reaches them.
//!
//! The session tools (`start`, `read_output`, `write_stdin`, `signal`, `list`,
//! `session_end`: module `process_tools`) keep processes in the server's one session; while
//! that session is live, `run` and `shell` run in it too, so that what they start can reach
//! what the session's processes serve.

use super::call::{argv_of, command_of, error_line, refused, Ctx};
use super::inflight::Call;
use super::policy::Policy;
use super::schema;
use crate::exec::{ExecError, ExecResult, Request, RunOptions, Step};
use crate::session::{Command, Session};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What a `tools/call` came to: a tool result (`isError` set or not), or a protocol error
/// (an unknown tool, parameters that are not a call).
pub enum Outcome {
    /// The `CallToolResult`.
    Result(Value),
    /// A JSON-RPC error: code and message.
    Error(i64, String),
}

/// The `tools/list` result. `structured`: the negotiated protocol knows `outputSchema` and
/// `title` (2025-06-18 and later).
pub fn list(policy: &Policy, structured: bool) -> Value {
    let t = policy.template.timeout_s;
    let common = |extra: (&str, Value)| {
        let mut props = Map::new();
        props.insert(extra.0.to_string(), extra.1);
        props.insert(
            "stdin".into(),
            json!({"type": "string", "description": "Text for the program's standard input (default: empty, /dev/null)."}),
        );
        props.insert(
            "timeout_s".into(),
            json!({"type": "number", "minimum": 1, "maximum": t,
                   "description": format!("Wall-clock limit in seconds; at most the server's {t}.")}),
        );
        props
    };
    let tool = |name: &str, title: &str, what: &str, key: &str, prop: Value| {
        let mut tool = json!({
            "name": name,
            "description": format!("{what} {} The result gives the exit status, stdout, stderr and the sandbox's own lines (a refused call and the flag of the server that would allow it).", policy.summary()),
            "inputSchema": {
                "type": "object",
                "properties": common((key, prop)),
                "required": [key],
                "additionalProperties": false,
            },
        });
        if structured {
            tool["title"] = title.into();
            tool["outputSchema"] = schema::output();
        }
        tool
    };
    let mut tools = vec![
        tool(
            "run",
            "Run a program",
            "Runs a program with its arguments, without a shell (no globbing, pipes or variables).",
            "argv",
            json!({"type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "The program (an absolute path or a name found in PATH) and its arguments."}),
        ),
        tool(
            "shell",
            "Run a shell command",
            "Runs one command line with /bin/sh -c (pipes, redirections, && and globbing work).",
            "command",
            json!({"type": "string", "minLength": 1, "description": "The command line."}),
        ),
    ];
    tools.extend(super::process_tools::list(policy, structured));
    json!({ "tools": tools })
}

/// Runs one `tools/call` (`params`: its `name` and `arguments`).
pub fn call(ctx: &Ctx<'_>, params: &Map<String, Value>, structured: bool) -> Outcome {
    let policy = ctx.policy;
    let name = match params.get("name") {
        Some(Value::String(n)) => n.as_str(),
        _ => {
            return Outcome::Error(
                super::jsonrpc::INVALID_PARAMS,
                "`name` must be a tool's name (a string)".into(),
            )
        }
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => {
            return Outcome::Error(
                super::jsonrpc::INVALID_PARAMS,
                "`arguments` must be an object".into(),
            )
        }
    };
    let argv = match name {
        "run" => arguments(&args, "argv").and_then(|()| argv_of(args.get("argv"))),
        "shell" => arguments(&args, "command").and_then(|()| command_of(args.get("command"))),
        other if super::process_tools::NAMES.contains(&other) => {
            return Outcome::Result(super::process_tools::call(ctx, other, &args, structured))
        }
        other => {
            return Outcome::Error(
                super::jsonrpc::INVALID_PARAMS,
                format!(
                    "unknown tool `{}` (the tools are run, shell, {})",
                    crate::escape::text(&other.chars().take(64).collect::<String>()),
                    super::process_tools::NAMES.join(", ")
                ),
            )
        }
    };
    let mut req = policy.template.clone();
    let checked = argv.and_then(|argv| {
        req.argv = argv;
        if let Some(s) = args.get("stdin") {
            req.stdin = Some(s.as_str().ok_or("stdin: must be a string")?.to_string());
        }
        if let Some(t) = args.get("timeout_s") {
            req.timeout_s = narrower_timeout(t, policy.template.timeout_s)?;
        }
        Ok(())
    });
    if let Err(why) = checked {
        return Outcome::Result(refused(&why, None));
    }
    let res = match ctx.procs.live() {
        Some(session) => in_session(&session, &req, ctx.call),
        None => one_shot(&req, ctx.call),
    };
    ctx.call.done();
    Outcome::Result(match res {
        Ok(r) => ran(&r, req.timeout_s, structured),
        Err(e) => refused(&error_line(&e), e.exit_code()),
    })
}

/// Runs `req` as a job of its own, killed when the call is cancelled.
fn one_shot(req: &Request, call: &Call) -> Result<ExecResult, ExecError> {
    let cancel = crate::exec::Cancel::new().map_err(Step::Cancel.error())?;
    let stop = cancel.clone();
    call.on_cancel(move || stop.cancel());
    let opts = RunOptions {
        cancel: Some(cancel),
        ..RunOptions::default()
    };
    crate::exec::exec_for(req, &opts, crate::exec::Audience::Cli)
}

/// Runs `req`'s command in the live session (its timeout the call's), its stdin written by a
/// thread of its own (a command that does not read it must not hold up its result), killed
/// when the call is cancelled. Refusals in its stderr are named as a one-shot job's are.
fn in_session(session: &Session, req: &Request, call: &Call) -> Result<ExecResult, ExecError> {
    // The one-shot checks (argv, stdin's size) with their words.
    // The session names the refusals in its stderr, worded for flags (the server's).
    req.validate()?;
    let cmd = Command::new(req.argv.clone()).timeout(Duration::from_secs_f64(req.timeout_s));
    let p = Arc::new(session.spawn(&cmd)?);
    let killer = Arc::clone(&p);
    call.on_cancel(move || {
        let _ = killer.signal(libc::SIGKILL);
    });
    let writer = Arc::clone(&p);
    let stdin = req.stdin.clone();
    std::thread::Builder::new()
        .name("sandbox-mcp-stdin".into())
        .spawn(move || {
            if let Some(data) = stdin {
                let _ = writer.write_stdin(data.as_bytes());
            }
            writer.close_stdin();
        })
        .map_err(Step::Command.error())?;
    p.finish()
        .ok_or_else(|| Step::Command.says("the command has no result"))
}

/// Refuses every key but the tool's own: a policy field (`profile`, `workspace`...) given as
/// an argument is named, with why it cannot be one.
fn arguments(args: &Map<String, Value>, key: &str) -> Result<(), String> {
    match args
        .keys()
        .find(|k| ![key, "stdin", "timeout_s"].contains(&k.as_str()))
    {
        None => Ok(()),
        Some(k) => Err(format!(
            "unknown argument `{}`: the tool takes {key}, stdin and timeout_s; the policy \
             (profile, paths, network, limits) is fixed by the server's flags",
            crate::escape::text(&k.chars().take(64).collect::<String>())
        )),
    }
}

/// A call's `timeout_s`: a number from 1 to the server's own limit.
fn narrower_timeout(v: &Value, fixed: f64) -> Result<f64, String> {
    let t = v
        .as_f64()
        .ok_or_else(|| "timeout_s: must be a number of seconds".to_string())?;
    if !(1.0..=fixed).contains(&t) {
        return Err(format!(
            "timeout_s: must be between 1 and {fixed} seconds (the server's --timeout), got {t}"
        ));
    }
    Ok(t)
}

/// The result of a call that ran: the text an agent reads, the exec result as
/// `structuredContent`, and `isError` unless the program exited with status 0.
fn ran(r: &ExecResult, timeout_s: f64, structured: bool) -> Value {
    let ok = r.exit_code == Some(0) && !r.timed_out;
    let mut result = json!({
        "content": [{"type": "text", "text": super::text::render(r, timeout_s)}],
        "isError": !ok,
    });
    if structured {
        result["structuredContent"] = serde_json::to_value(r).unwrap_or(Value::Null);
    }
    result
}
