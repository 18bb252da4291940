//! The session tools: `start` a command in the background, `read_output`, `write_stdin`,
//! `signal`, `list`, `session_end`; their schemas, the checks of their arguments, and their
//! results (docs/mcp.md, "Session tools").
//!
//! Like `run` and `shell`, they take nothing of the policy: the processes run in the server's
//! one session, built from the server's fixed policy; a call names a command, a process id,
//! bytes for stdin or a signal, and every other key is refused by name.

use super::call::{argv_of, command_of, error_line, refused, Ctx};
use super::procs::Snapshot;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The tools' names, in the order `tools/list` gives them.
pub const NAMES: [&str; 6] = [
    "start",
    "read_output",
    "write_stdin",
    "signal",
    "list",
    "session_end",
];

/// Most bytes of `data` in one `write_stdin` (more is refused, never cut).
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

/// `read_output`'s wait when the call gives none: long enough for a prompt's answer, short
/// enough that a silent server's read comes back soon.
const DEFAULT_READ_WAIT_S: f64 = 2.0;

/// The signals a call may send, by name: those that interrupt, end or kill a command.
const SIGNALS: [(&str, i32); 5] = [
    ("INT", libc::SIGINT),
    ("TERM", libc::SIGTERM),
    ("KILL", libc::SIGKILL),
    ("HUP", libc::SIGHUP),
    ("QUIT", libc::SIGQUIT),
];

/// The tools' entries for `tools/list`.
pub fn list(ctx_policy: &super::policy::Policy, structured: bool) -> Vec<Value> {
    let t = ctx_policy.template.timeout_s;
    let id = json!({"type": "integer", "minimum": 1, "description": "The id `start` returned."});
    let wait = |default: f64| {
        json!({"type": "number", "minimum": 0, "maximum": t,
               "description": format!("Seconds to wait for new output or the end of the process; the call returns as soon as either comes (default {default}; at most the server's {t}).")})
    };
    let snapshot = snapshot_schema();
    let tool =
        |name: &str, title: &str, what: &str, props: Value, required: &[&str], out: &Value| {
            let mut tool = json!({
                "name": name,
                "description": what,
                "inputSchema": {
                    "type": "object",
                    "properties": props,
                    "required": required,
                    "additionalProperties": false,
                },
            });
            if structured {
                tool["title"] = title.into();
                tool["outputSchema"] = out.clone();
            }
            tool
        };
    vec![
        tool(
            "start",
            "Start a background process",
            &format!(
                "Starts a command in the background in this server's session and returns its \
                 process id at once (after wait_s, with its first output). Give argv (no shell) \
                 or command (a line for /bin/sh -c). It runs until it exits, is signalled, or \
                 the session ends; run and shell calls run in the same session while it lasts, \
                 so they reach the servers it starts. At most {} processes are kept. {}",
                super::procs::MAX_PROCESSES,
                ctx_policy.summary()
            ),
            json!({
                "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                         "description": "The program and its arguments (not with command)."},
                "command": {"type": "string", "minLength": 1,
                            "description": "A command line for /bin/sh -c (not with argv)."},
                "timeout_s": {"type": "number", "minimum": 1, "maximum": crate::exec::MAX_TIMEOUT_S,
                              "description": "Kill the process after this many seconds (default: it lives until ended, at most a day)."},
                "wait_s": wait(0.0),
            }),
            &[],
            &snapshot,
        ),
        tool(
            "read_output",
            "Read a process's output",
            "Returns the stdout and stderr a background process wrote since the last read, and \
             its exit status once it has ended (after which its id is forgotten).",
            json!({"process_id": id, "wait_s": wait(DEFAULT_READ_WAIT_S)}),
            &["process_id"],
            &snapshot,
        ),
        tool(
            "write_stdin",
            "Write to a process's stdin",
            &format!(
                "Writes text to a background process's stdin (at most {MAX_WRITE_BYTES} bytes); \
                 eof closes it. Returns the output since the last read, as read_output does."
            ),
            json!({
                "process_id": id,
                "data": {"type": "string", "maxLength": MAX_WRITE_BYTES, "description": "The text to write (a newline ends a line)."},
                "eof": {"type": "boolean", "description": "Close stdin after writing (the process reads end of file)."},
                "wait_s": wait(0.0),
            }),
            &["process_id"],
            &snapshot,
        ),
        tool(
            "signal",
            "Signal a process",
            "Sends INT (as Ctrl-C), TERM, KILL, HUP or QUIT to a background process's process \
             group. Returns the output since the last read, as read_output does.",
            json!({
                "process_id": id,
                "signal": {"type": "string", "enum": SIGNALS.iter().map(|s| s.0).collect::<Vec<_>>()},
                "wait_s": wait(0.0),
            }),
            &["process_id", "signal"],
            &snapshot,
        ),
        tool(
            "list",
            "List background processes",
            "Lists the background processes: running, or ended with their result not read yet.",
            json!({}),
            &[],
            &json!({
                "type": "object",
                "properties": {
                    "session": {"type": "boolean", "description": "Whether the session is live."},
                    "processes": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "process_id": {"type": "integer"},
                            "command": {"type": "array", "items": {"type": "string"}},
                            "running": {"type": "boolean"},
                            "exit_code": {"type": ["integer", "null"]},
                            "signal": {"type": ["integer", "null"]},
                            "age_s": {"type": "number"},
                            "unread_bytes": {"type": "integer"}
                        },
                        "required": ["process_id", "command", "running", "exit_code", "signal", "age_s", "unread_bytes"]
                    }}
                },
                "required": ["session", "processes"]
            }),
        ),
        tool(
            "session_end",
            "End the session",
            "Ends the session: every background process is killed, the session's /tmp is gone, \
             and run and shell run on their own again. The next start begins a new session.",
            json!({}),
            &[],
            &json!({
                "type": "object",
                "properties": {
                    "ended": {"type": "boolean", "description": "Whether there was a session."},
                    "processes": {"type": "integer", "description": "How many processes it held."}
                },
                "required": ["ended", "processes"]
            }),
        ),
    ]
}

/// The result schema of `start`, `read_output`, `write_stdin` and `signal`.
fn snapshot_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "process_id": {"type": "integer"},
            "running": {"type": "boolean"},
            "stdout": {"type": "string", "description": "New stdout since the last read."},
            "stderr": {"type": "string", "description": "New stderr since the last read."},
            "stdout_dropped": {"type": "integer", "description": "Bytes of stdout dropped since the last read: more was written than the buffer keeps (the oldest go first)."},
            "stderr_dropped": {"type": "integer"},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["integer", "null"]},
            "timed_out": {"type": "boolean"},
            "sandbox": {"type": "array", "items": {"type": "string"},
                        "description": "Once ended: the sandbox's lines (refused calls and the flag that allows them, limits hit, degraded layers)."}
        },
        "required": ["process_id", "running", "stdout", "stderr", "stdout_dropped", "stderr_dropped", "exit_code", "signal", "timed_out", "sandbox"]
    })
}

/// Runs session tool `name`; every outcome is a tool result (a refusal has `isError`).
pub fn call(ctx: &Ctx<'_>, name: &str, args: &Map<String, Value>, structured: bool) -> Value {
    let done = match name {
        "start" => start(ctx, args),
        "read_output" => only(args, name, &["process_id", "wait_s"]).and_then(|()| {
            let e = ctx.procs.get(process_id(args)?)?;
            let wait = wait_of(args, DEFAULT_READ_WAIT_S, ctx)?;
            Ok(Done::Snapshot(Box::new(ctx.procs.read(&e, wait))))
        }),
        "write_stdin" => write_stdin(ctx, args),
        "signal" => signal(ctx, args),
        "list" => only(args, name, &[]).map(|()| Done::List),
        "session_end" => only(args, name, &[]).map(|()| {
            let (ended, n) = ctx.procs.end();
            Done::Ended(ended, n)
        }),
        _ => Err(format!("unknown tool `{name}`")),
    };
    match done {
        Err(why) => refused(&why, None),
        Ok(Done::Refused(why, code)) => refused(&why, code),
        Ok(Done::Snapshot(s)) => snapshot(&s, structured),
        Ok(Done::List) => list_result(ctx, structured),
        Ok(Done::Ended(ended, n)) => {
            let text = if ended {
                format!("session ended: {n} process(es) killed")
            } else {
                "no session was live".to_string()
            };
            with_structure(text, json!({"ended": ended, "processes": n}), structured)
        }
    }
}

/// What a call came to.
enum Done {
    Snapshot(Box<Snapshot>),
    List,
    Ended(bool, usize),
    /// The engine refused the command (the shell's status for one that cannot run).
    Refused(String, Option<i32>),
}

/// Refuses every key but `keys`, naming why the policy is none of them.
fn only(args: &Map<String, Value>, tool: &str, keys: &[&str]) -> Result<(), String> {
    match args.keys().find(|k| !keys.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(format!(
            "unknown argument `{}`: {tool} takes {}; the policy (profile, paths, network, \
             limits) is fixed by the server's flags",
            crate::escape::text(&k.chars().take(64).collect::<String>()),
            if keys.is_empty() {
                "no arguments".to_string()
            } else {
                keys.join(", ")
            }
        )),
    }
}

fn process_id(args: &Map<String, Value>) -> Result<u64, String> {
    match args.get("process_id") {
        None => Err("process_id: missing (the id start returned)".into()),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or_else(|| "process_id: must be a positive integer (the id start returned)".into()),
    }
}

/// `wait_s`: 0 to the server's `--timeout` (a call's longest), else `default`.
fn wait_of(args: &Map<String, Value>, default: f64, ctx: &Ctx<'_>) -> Result<Duration, String> {
    let max = ctx.policy.template.timeout_s;
    let Some(v) = args.get("wait_s") else {
        return Ok(Duration::from_secs_f64(default.min(max)));
    };
    match v.as_f64() {
        Some(w) if (0.0..=max).contains(&w) => Ok(Duration::from_secs_f64(w)),
        _ => Err(format!(
            "wait_s: must be a number of seconds from 0 to {max} (the server's --timeout)"
        )),
    }
}

fn start(ctx: &Ctx<'_>, args: &Map<String, Value>) -> Result<Done, String> {
    only(args, "start", &["argv", "command", "timeout_s", "wait_s"])?;
    let argv = match (args.get("argv"), args.get("command")) {
        (Some(_), Some(_)) => return Err("give argv or command, not both".into()),
        (None, None) => {
            return Err(
                "argv or command: missing (argv: the program and its arguments; command: a \
                 line for /bin/sh -c)"
                    .into(),
            )
        }
        (a @ Some(_), None) => argv_of(a)?,
        (None, c) => command_of(c)?,
    };
    let timeout = match args.get("timeout_s") {
        None => None,
        Some(v) => match v.as_f64() {
            Some(t) if (1.0..=crate::exec::MAX_TIMEOUT_S).contains(&t) => {
                Some(Duration::from_secs_f64(t))
            }
            _ => {
                return Err(format!(
                    "timeout_s: must be between 1 and {} seconds",
                    crate::exec::MAX_TIMEOUT_S
                ))
            }
        },
    };
    let wait = wait_of(args, 0.0, ctx)?;
    match ctx.procs.start(argv, timeout) {
        Ok(id) => {
            let e = ctx.procs.get(id)?;
            Ok(Done::Snapshot(Box::new(ctx.procs.read(&e, wait))))
        }
        Err(e) => Ok(Done::Refused(error_line(&e), e.exit_code())),
    }
}

fn write_stdin(ctx: &Ctx<'_>, args: &Map<String, Value>) -> Result<Done, String> {
    only(
        args,
        "write_stdin",
        &["process_id", "data", "eof", "wait_s"],
    )?;
    let e = ctx.procs.get(process_id(args)?)?;
    let data = match args.get("data") {
        None => "",
        Some(Value::String(s)) if s.len() <= MAX_WRITE_BYTES => s.as_str(),
        Some(Value::String(s)) => {
            return Err(format!(
                "data: {} bytes; at most {MAX_WRITE_BYTES} in one call (send the rest in more)",
                s.len()
            ))
        }
        Some(_) => return Err("data: must be a string".into()),
    };
    let eof = match args.get("eof") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("eof: must be true or false".into()),
    };
    let wait = wait_of(args, 0.0, ctx)?;
    if e.ended() {
        return Err(format!(
            "process {} has ended: its stdin takes nothing (read_output gives its result)",
            e.id
        ));
    }
    if !data.is_empty() {
        e.process().write_stdin(data.as_bytes()).map_err(|err| {
            format!(
                "process {}: its stdin does not take it ({err}): eof was sent, or it closed \
                 its stdin",
                e.id
            )
        })?;
    }
    if eof {
        e.process().close_stdin();
    }
    Ok(Done::Snapshot(Box::new(ctx.procs.read(&e, wait))))
}

fn signal(ctx: &Ctx<'_>, args: &Map<String, Value>) -> Result<Done, String> {
    only(args, "signal", &["process_id", "signal", "wait_s"])?;
    let e = ctx.procs.get(process_id(args)?)?;
    let names = || SIGNALS.iter().map(|s| s.0).collect::<Vec<_>>().join(", ");
    let sig = match args.get("signal") {
        Some(Value::String(s)) => {
            let bare = s.strip_prefix("SIG").unwrap_or(s);
            SIGNALS
                .iter()
                .find(|(n, _)| *n == bare)
                .map(|s| s.1)
                .ok_or_else(|| {
                    format!(
                        "signal: `{}` is not one of {}",
                        crate::escape::text(&s.chars().take(32).collect::<String>()),
                        names()
                    )
                })?
        }
        None => return Err(format!("signal: missing (one of {})", names())),
        Some(_) => return Err(format!("signal: must be a name, one of {}", names())),
    };
    let wait = wait_of(args, 0.0, ctx)?;
    if e.ended() {
        return Err(format!(
            "process {} has ended: no signal was sent (read_output gives its result)",
            e.id
        ));
    }
    e.process()
        .signal(sig)
        .map_err(|err| format!("process {}: the signal was not delivered: {err}", e.id))?;
    Ok(Done::Snapshot(Box::new(ctx.procs.read(&e, wait))))
}

/// A tool result: `text` for the agent, `structured` as `structuredContent` when the
/// protocol has it.
fn with_structure(text: String, structured_value: Value, structured: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if structured {
        r["structuredContent"] = structured_value;
    }
    r
}

/// The result of `start`, `read_output`, `write_stdin` and `signal`.
fn snapshot(s: &Snapshot, structured: bool) -> Value {
    let mut text = match &s.result {
        None => format!("process {}: running\n", s.id),
        Some(r) => format!(
            "process {}: {}\n",
            s.id,
            super::text::status(r, s.timeout_s)
        ),
    };
    super::text::section(&mut text, "stdout", &s.stdout, false);
    super::text::section(&mut text, "stderr", &s.stderr, false);
    for (name, n) in [("stdout", s.stdout_dropped), ("stderr", s.stderr_dropped)] {
        if n > 0 {
            text.push_str(&format!(
                "[{n} bytes of {name} dropped before this: more was written than is kept \
                 between reads; the oldest went first]\n"
            ));
        }
    }
    let lines = s
        .result
        .as_ref()
        .map(|r| super::text::sandbox_lines(r, s.timeout_s))
        .unwrap_or_default();
    if !lines.is_empty() {
        text.push_str("--- sandbox ---\n");
        for l in &lines {
            text.push_str(&crate::escape::line(l));
            text.push('\n');
        }
    }
    let r = s.result.as_ref();
    with_structure(
        text,
        json!({
            "process_id": s.id,
            "running": r.is_none(),
            "stdout": s.stdout,
            "stderr": s.stderr,
            "stdout_dropped": s.stdout_dropped,
            "stderr_dropped": s.stderr_dropped,
            "exit_code": r.and_then(|r| r.exit_code),
            "signal": r.and_then(|r| r.signal),
            "timed_out": r.is_some_and(|r| r.timed_out),
            "sandbox": lines,
        }),
        structured,
    )
}

fn list_result(ctx: &Ctx<'_>, structured: bool) -> Value {
    let rows = ctx.procs.list();
    let live = ctx.procs.live().is_some();
    let mut text = format!(
        "session {}; {} process(es)\n",
        if live { "live" } else { "not started" },
        rows.len()
    );
    let mut items = Vec::new();
    for r in &rows {
        let state = match r.ended {
            None => "running".to_string(),
            Some((Some(c), _)) => format!("exited {c}"),
            Some((None, Some(s))) => format!("killed by signal {s}"),
            Some((None, None)) => "ended".to_string(),
        };
        text.push_str(&format!(
            "{}\t{}\t{:.0}s\t{}\n",
            r.id,
            state,
            r.age_s,
            crate::escape::line(r.argv.join(" "))
        ));
        items.push(json!({
            "process_id": r.id,
            "command": r.argv,
            "running": r.ended.is_none(),
            "exit_code": r.ended.and_then(|e| e.0),
            "signal": r.ended.and_then(|e| e.1),
            "age_s": r.age_s,
            "unread_bytes": r.unread,
        }));
    }
    with_structure(
        text,
        json!({"session": live, "processes": items}),
        structured,
    )
}
