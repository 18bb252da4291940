//! What every tool call shares: its context (the fixed policy, the session's processes, the
//! call itself), the bounds and readers of its command arguments, and the result of a call
//! that did not run.

use super::inflight::Call;
use super::policy::Policy;
use super::procs::Procs;
use crate::exec::ExecError;
use serde_json::{json, Value};

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

/// `argv`: a non-empty list of strings within the bounds (the engine checks each string).
pub(crate) fn argv_of(v: Option<&Value>) -> Result<Vec<String>, String> {
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
pub(crate) fn command_of(v: Option<&Value>) -> Result<Vec<String>, String> {
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

/// An engine refusal as one line, in the words `exec --json` uses (`argv[0]: ...`).
pub(crate) fn error_line(e: &ExecError) -> String {
    format!("{}: {}", e.field(), e.reason())
}

/// The result of a call that did not run: `isError`, the reason (and the shell's status for
/// a program that could not be started). No `structuredContent`: the output schema describes
/// a run, and the SDKs check results against it.
pub(crate) fn refused(why: &str, exit_code: Option<i32>) -> Value {
    let mut text = format!("sandbox: refused: {}", crate::escape::line(why));
    if let Some(code) = exit_code {
        text.push_str(&format!("\nexit status {code}"));
    }
    json!({ "content": [{"type": "text", "text": text}], "isError": true })
}
