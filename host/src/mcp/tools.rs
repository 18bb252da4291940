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

use super::inflight::Call;
use super::policy::Policy;
use super::procs::{Namer, Procs};
use super::schema;
use crate::exec::{ExecError, ExecResult, Request, RunOptions};
use crate::session::{Command, Session};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What a call runs with: the fixed policy, the session's processes, and its own entry among
/// the calls in progress (for cancellation).
pub struct Ctx<'a> {
    /// The server's policy.
    pub policy: &'a Policy,
    /// The session and its processes.
    pub procs: &'a Procs,
    /// This call.
    pub call: &'a Call,
}

/// Most arguments in `argv`.
pub const MAX_ARGS: usize = 4096;
/// Most bytes of `argv` (or `command`) in all: half of Linux's usual `ARG_MAX` (2 MiB), so
/// the environment keeps room and the limit is ours to name, not `execve`'s `E2BIG`.
pub const MAX_ARGV_BYTES: usize = 1024 * 1024;

/// The shell `shell` runs its line with.
pub const SHELL: &str = "/bin/sh";

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
    let cancel = crate::exec::Cancel::new().map_err(ExecError::Setup)?;
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
    let namer = Namer::new(req.validate()?);
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
        .map_err(ExecError::Setup)?;
    let mut r = p
        .finish()
        .ok_or_else(|| ExecError::Setup(std::io::Error::other("the command has no result")))?;
    if let Some(n) = namer {
        n.name(&mut r);
    }
    Ok(r)
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

/// `argv`: a non-empty list of strings within the bounds (the engine checks each string).
pub(super) fn argv_of(v: Option<&Value>) -> Result<Vec<String>, String> {
    let list = match v {
        None => {
            return Err("argv: missing (a list of strings: the program and its arguments)".into())
        }
        Some(Value::Array(l)) if !l.is_empty() => l,
        Some(_) => return Err("argv: must be a non-empty list of strings".into()),
    };
    if list.len() > MAX_ARGS {
        return Err(format!(
            "argv: {} arguments; at most {MAX_ARGS}",
            list.len()
        ));
    }
    let mut argv = Vec::with_capacity(list.len());
    let mut bytes = 0;
    for (i, a) in list.iter().enumerate() {
        let s = a
            .as_str()
            .ok_or_else(|| format!("argv[{i}]: must be a string"))?;
        bytes += s.len() + 1;
        if bytes > MAX_ARGV_BYTES {
            return Err(format!("argv: more than {MAX_ARGV_BYTES} bytes in all"));
        }
        argv.push(s.to_string());
    }
    Ok(argv)
}

/// `command`: one line for `/bin/sh -c`.
pub(super) fn command_of(v: Option<&Value>) -> Result<Vec<String>, String> {
    let line = match v {
        None => return Err("command: missing (a string: the command line)".into()),
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(_) => return Err("command: must be a non-empty string".into()),
    };
    if line.len() > MAX_ARGV_BYTES {
        return Err(format!("command: more than {MAX_ARGV_BYTES} bytes"));
    }
    // A NUL would end the line early in execve: refused rather than cut.
    if line.contains('\0') {
        return Err("command: must not contain NUL".into());
    }
    Ok(vec![SHELL.into(), "-c".into(), line.clone()])
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

/// An engine refusal as one line, in the words `exec --json` uses (`argv[0]: ...`).
pub(super) fn error_line(e: &ExecError) -> String {
    format!("{}: {}", e.field(), e.reason())
}

/// The result of a call that did not run: `isError`, the reason (and the shell's status for
/// a program that could not be started). No `structuredContent`: the output schema describes
/// a run, and the SDKs check results against it.
pub(super) fn refused(why: &str, exit_code: Option<i32>) -> Value {
    let mut text = format!("sandbox: refused: {}", crate::escape::line(why));
    if let Some(code) = exit_code {
        text.push_str(&format!("\nexit status {code}"));
    }
    json!({ "content": [{"type": "text", "text": text}], "isError": true })
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
