//! The session operations of `sandbox serve`: lines with an `op` member. `session_start`
//! builds a session from the request fields of the line; `start` runs a command in it,
//! streaming `stdout`/`stderr` event lines (with `stream`) and then its result line; `stdin`,
//! `signal` and `session_end` act on what was started. A connection's sessions are its own:
//! another connection cannot name them, and they end when the connection does.

use super::{Command, Process, Session, SessionOptions};
use crate::exec::json::parse;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where an operation's lines go: the connection's writer, and its count of answers owed.
pub(crate) trait Sink: Send + Sync {
    /// Writes one line (ending in a newline).
    fn line(&self, line: &[u8]);
    /// A result line is now owed (a command started).
    fn owe(&self);
    /// The owed result line was written.
    fn paid(&self);
}

/// Most sessions one connection may hold.
pub(crate) const MAX_SESSIONS: usize = 64;
/// Most commands of one connection running at once.
const MAX_PROCESSES: usize = 1024;

/// The signals a client may send, by name.
const SIGNALS: &[(&str, i32)] = &[
    ("SIGINT", libc::SIGINT),
    ("SIGTERM", libc::SIGTERM),
    ("SIGKILL", libc::SIGKILL),
    ("SIGHUP", libc::SIGHUP),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGUSR2", libc::SIGUSR2),
    ("SIGCONT", libc::SIGCONT),
    ("SIGSTOP", libc::SIGSTOP),
    ("SIGTSTP", libc::SIGTSTP),
    ("SIGWINCH", libc::SIGWINCH),
];

/// One connection's sessions and running commands.
pub(crate) struct Ops {
    sink: Arc<dyn Sink>,
    sessions: HashMap<String, Arc<Session>>,
    /// The sessions again, for an [`Ender`] on another thread (which must not keep them).
    live: Arc<Mutex<Vec<std::sync::Weak<Session>>>>,
    processes: Arc<Mutex<HashMap<String, Arc<Process>>>>,
    next: u64,
}

/// Ends a connection's sessions from another thread (the server's shutdown, a client gone):
/// their running commands are killed and answered `cancelled`, so that what the connection
/// owes is paid.
#[derive(Clone)]
pub(crate) struct Ender {
    live: Arc<Mutex<Vec<std::sync::Weak<Session>>>>,
}

impl Ender {
    /// Ends every session of the connection still alive.
    pub(crate) fn end_all(&self) {
        let live: Vec<Arc<Session>> = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for s in live {
            s.end();
        }
    }
}

/// An error naming the field, with the line's `id` and `op`.
fn error(id: Option<&str>, op: &str, field: &str, reason: &str) -> Vec<u8> {
    let mut obj = Map::new();
    obj.insert("id".into(), id.map_or(Value::Null, Value::from));
    obj.insert("op".into(), Value::from(op));
    obj.insert(
        "error".into(),
        serde_json::json!({"field": field, "reason": reason}),
    );
    line(obj)
}

fn line(obj: Map<String, Value>) -> Vec<u8> {
    let mut l = serde_json::to_vec(&Value::Object(obj)).unwrap_or_default();
    l.push(b'\n');
    l
}

impl Ops {
    pub(crate) fn new(sink: Arc<dyn Sink>) -> Ops {
        Ops {
            sink,
            sessions: HashMap::new(),
            live: Arc::default(),
            processes: Arc::default(),
            next: 1,
        }
    }

    /// What ends this connection's sessions from another thread.
    pub(crate) fn ender(&self) -> Ender {
        Ender {
            live: Arc::clone(&self.live),
        }
    }

    /// Handles `text` when it is an operation (an object with `op`); false otherwise (an exec
    /// request, for the caller).
    pub(crate) fn handle(&mut self, text: &[u8]) -> bool {
        // Cheap test first: exec requests, the common case, never name `op`.
        if !text.windows(4).any(|w| w == b"\"op\"") {
            return false;
        }
        let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(text) else {
            return false;
        };
        let Some(op) = obj.remove("op") else {
            return false;
        };
        let id = match obj.remove("id") {
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 256 => s,
            _ => {
                let op = op.as_str().unwrap_or("");
                self.sink.line(&error(
                    None,
                    op,
                    "id",
                    "missing (a non-empty string of at most 256 bytes)",
                ));
                return true;
            }
        };
        let op = op.as_str().unwrap_or("").to_string();
        let res = match op.as_str() {
            "session_start" => self.session_start(&id, obj),
            "start" => self.start(&id, obj),
            "stdin" => self.stdin(&id, obj),
            "signal" => self.signal(&id, obj),
            "resize" => self.resize(&id, obj),
            "session_end" => self.session_end(&id, obj),
            _ => Err((
                "op",
                "unknown; one of session_start, start, stdin, signal, resize, session_end"
                    .to_string(),
            )),
        };
        if let Err((field, reason)) = res {
            self.sink.line(&error(Some(&id), &op, field, &reason));
        }
        true
    }

    fn session_start(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        if self.sessions.len() >= MAX_SESSIONS {
            return Err((
                "session",
                format!("this connection holds {MAX_SESSIONS} sessions already; end one first"),
            ));
        }
        let idle = match obj.remove("idle_s") {
            None => None,
            Some(v) => match v.as_f64() {
                Some(s) if (0.1..=86400.0).contains(&s) => Some(Duration::from_secs_f64(s)),
                _ => return Err(("idle_s", "must be a number from 0.1 to 86400".into())),
            },
        };
        if obj.contains_key("argv") {
            return Err((
                "argv",
                "a session has no program of its own; give argv to `start`".into(),
            ));
        }
        obj.insert("argv".into(), serde_json::json!(["/bin/true"]));
        let bytes = serde_json::to_vec(&Value::Object(obj)).unwrap_or_default();
        let policy = parse(&bytes).map_err(|r| (field_static(&r.field), r.reason))?;
        let exe = std::env::current_exe().map_err(|e| ("session", e.to_string()))?;
        let mut options = SessionOptions::new(exe);
        options.idle_timeout = idle;
        let session =
            Session::start(&policy, &options).map_err(|e| (field_static(e.field()), e.reason()))?;
        let name = format!("s{}", self.next);
        self.next += 1;
        let session = Arc::new(session);
        {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(&session));
        }
        self.sessions.insert(name.clone(), session);
        let mut obj = Map::new();
        obj.insert("id".into(), Value::from(id));
        obj.insert("session".into(), Value::from(name));
        self.sink.line(&line(obj));
        Ok(())
    }

    fn session(
        &self,
        obj: &mut Map<String, Value>,
    ) -> Result<Arc<Session>, (&'static str, String)> {
        let name = match obj.remove("session") {
            Some(Value::String(s)) => s,
            _ => {
                return Err((
                    "session",
                    "missing (the id `session_start` returned)".into(),
                ))
            }
        };
        let s = self.sessions.get(&name).ok_or((
            "session",
            format!(
                "`{}`: no such session on this connection",
                name.escape_debug()
            ),
        ))?;
        if s.is_ended() {
            return Err(("session", format!("`{name}` has ended; start a new one")));
        }
        Ok(Arc::clone(s))
    }

    fn start(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        let session = self.session(&mut obj)?;
        let mut processes = self.processes.lock().unwrap_or_else(|e| e.into_inner());
        if processes.contains_key(id) {
            return Err((
                "id",
                format!("`{}` names a running command already", id.escape_debug()),
            ));
        }
        if processes.len() >= MAX_PROCESSES {
            return Err((
                "start",
                format!("{MAX_PROCESSES} commands run on this connection already"),
            ));
        }
        let stream = match obj.remove("stream") {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(("stream", "must be true or false".into())),
        };
        let argv: Vec<String> = match obj.remove("argv") {
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(("argv", "must be a list of strings".to_string())),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(("argv", "missing (a list of strings)".into())),
        };
        let mut cmd = Command::new(argv).stream(stream);
        match obj.remove("env") {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    match v {
                        Value::String(v) => cmd = cmd.env(k, v),
                        _ => {
                            return Err(("env", format!("`{}` must be a string", k.escape_debug())))
                        }
                    }
                }
            }
            Some(_) => return Err(("env", "must be an object of strings".into())),
        }
        match obj.remove("cwd") {
            None => {}
            Some(Value::String(c)) => cmd = cmd.cwd(c),
            Some(_) => return Err(("cwd", "must be a string".into())),
        }
        match obj.remove("tty") {
            None => {}
            Some(Value::Object(mut t)) => {
                let (cols, rows) = terminal_size("tty", &mut t)?;
                if let Some(k) = t.keys().next() {
                    return Err(("tty", format!("unknown field `{}`", k.escape_debug())));
                }
                cmd = cmd.pty(cols, rows);
            }
            Some(_) => return Err(("tty", "must be an object {\"cols\": N, \"rows\": N}".into())),
        }
        match obj.remove("timeout_s") {
            None => {}
            Some(v) => match v.as_f64() {
                Some(t) if t.is_finite() && t > 0.0 && t <= 1e9 => {
                    cmd = cmd.timeout(Duration::from_secs_f64(t))
                }
                _ => return Err(("timeout_s", "must be a positive number".into())),
            },
        }
        match obj.remove("limits") {
            None => {}
            Some(Value::Object(l)) => cmd = own_limits(cmd, l)?,
            Some(_) => {
                return Err((
                    "limits",
                    "must be an object {\"memory_bytes\": N, \"processes\": N}".into(),
                ))
            }
        }
        if let Some(k) = obj.keys().next() {
            return Err(("start", format!("unknown field `{}`", k.escape_debug())));
        }
        let process = Arc::new(
            session
                .spawn(&cmd)
                .map_err(|e| (field_static(e.field()), e.reason()))?,
        );
        processes.insert(id.to_string(), Arc::clone(&process));
        drop(processes);
        self.sink.owe();
        let (sink, table, id) = (
            Arc::clone(&self.sink),
            Arc::clone(&self.processes),
            id.to_string(),
        );
        std::thread::Builder::new()
            .name("sandbox-serve-session".into())
            .spawn(move || relay(sink, table, id, process, stream))
            .map_err(|e| ("start", e.to_string()))?;
        Ok(())
    }

    fn process(&self, id: &str) -> Result<Arc<Process>, (&'static str, String)> {
        self.processes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or((
                "id",
                format!(
                    "`{}`: no running command of this connection",
                    id.escape_debug()
                ),
            ))
    }

    fn stdin(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        let p = self.process(id)?;
        let data = match obj.remove("data") {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(("data", "must be a string".into())),
        };
        let eof = match obj.remove("eof") {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(("eof", "must be true or false".into())),
        };
        if data.is_none() && !eof {
            return Err(("data", "missing (give data, eof, or both)".into()));
        }
        if let Some(d) = data {
            p.write_stdin(d.as_bytes())
                .map_err(|e| ("stdin", format!("cannot write: {e}")))?;
        }
        if eof {
            p.close_stdin();
        }
        Ok(())
    }

    fn signal(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        let p = self.process(id)?;
        let name = match obj.remove("signal") {
            Some(Value::String(s)) => s,
            _ => {
                return Err((
                    "signal",
                    "missing (a name: SIGINT, SIGTERM, SIGKILL, ...)".into(),
                ))
            }
        };
        let upper = name.to_ascii_uppercase();
        let full = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        let sig = SIGNALS
            .iter()
            .find(|(n, _)| *n == full)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
                (
                    "signal",
                    format!(
                        "`{}` is not one of {}",
                        name.escape_debug(),
                        names.join(", ")
                    ),
                )
            })?;
        p.signal(sig).map_err(|e| ("signal", e.to_string()))
    }

    fn resize(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        let p = self.process(id)?;
        let (cols, rows) = terminal_size("resize", &mut obj)?;
        if let Some(k) = obj.keys().next() {
            return Err(("resize", format!("unknown field `{}`", k.escape_debug())));
        }
        p.resize(cols, rows).map_err(|e| {
            (
                "resize",
                format!("{e} (only a command started with \"tty\" has a terminal)"),
            )
        })
    }

    fn session_end(
        &mut self,
        id: &str,
        mut obj: Map<String, Value>,
    ) -> Result<(), (&'static str, String)> {
        let name = match obj.remove("session") {
            Some(Value::String(s)) => s,
            _ => {
                return Err((
                    "session",
                    "missing (the id `session_start` returned)".into(),
                ))
            }
        };
        let s = self.sessions.remove(&name).ok_or((
            "session",
            format!(
                "`{}`: no such session on this connection",
                name.escape_debug()
            ),
        ))?;
        s.end();
        let mut obj = Map::new();
        obj.insert("id".into(), Value::from(id));
        obj.insert("ended".into(), Value::from(name));
        self.sink.line(&line(obj));
        Ok(())
    }
}

impl Drop for Ops {
    fn drop(&mut self) {
        // The connection is done: its sessions end with it.
        for s in self.sessions.values() {
            s.end();
        }
    }
}

/// A refusal's field as the static name the error carries (fields are few and known).
/// Largest terminal side accepted, in cells.
const MAX_TERMINAL_SIDE: u64 = 1000;

/// `cols` and `rows` of `obj` (removed from it): whole numbers from 1 to [`MAX_TERMINAL_SIDE`].
fn terminal_size(
    field: &'static str,
    obj: &mut Map<String, Value>,
) -> Result<(u16, u16), (&'static str, String)> {
    let mut side = |name: &str| match obj.remove(name).and_then(|v| v.as_u64()) {
        Some(n) if (1..=MAX_TERMINAL_SIDE).contains(&n) => Ok(n as u16),
        _ => Err((
            field,
            format!("`{name}` must be a whole number from 1 to {MAX_TERMINAL_SIDE}"),
        )),
    };
    Ok((side("cols")?, side("rows")?))
}

fn field_static(f: &str) -> &'static str {
    const FIELDS: &[&str] = &[
        "argv",
        "argv[0]",
        "cwd",
        "env",
        "timeout_s",
        "profile",
        "session",
        "workspace",
        "limits.memory_bytes",
        "limits.processes",
        "limits",
        "network",
        "stdin",
        "sandbox",
        "request",
        "landlock",
        "isolation",
        "tty",
        "resize",
    ];
    FIELDS
        .iter()
        .find(|x| f == **x || f.starts_with(&format!("{x}.")) || f.starts_with(&format!("{x}[")))
        .copied()
        .unwrap_or("request")
}

/// Writes a command's event lines while it runs, then its result line.
fn relay(
    sink: Arc<dyn Sink>,
    table: Arc<Mutex<HashMap<String, Arc<Process>>>>,
    id: String,
    process: Arc<Process>,
    stream: bool,
) {
    if stream {
        let mut carry: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        for ev in process.events() {
            let (name, k, bytes) = match ev {
                super::Event::Stdout(b) => ("stdout", 0, b),
                super::Event::Stderr(b) => ("stderr", 1, b),
            };
            let text = utf8_chunk(&mut carry[k], bytes);
            if text.is_empty() {
                continue;
            }
            let mut obj = Map::new();
            obj.insert("id".into(), Value::from(id.as_str()));
            obj.insert("event".into(), Value::from(name));
            obj.insert("data".into(), Value::from(text));
            sink.line(&line(obj));
        }
    }
    let result = process.finish();
    table.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    if let Some(r) = result {
        let mut body = serde_json::to_value(&r).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut body {
            let mut obj = Map::new();
            obj.insert("id".into(), Value::from(id.as_str()));
            obj.extend(std::mem::take(m));
            sink.line(&line(obj));
        }
    }
    sink.paid();
}

/// `bytes` after `carry` as text: a character split between two reads is held back until its
/// end comes; invalid bytes become U+FFFD.
fn utf8_chunk(carry: &mut Vec<u8>, bytes: Vec<u8>) -> String {
    carry.extend(bytes);
    let keep = match std::str::from_utf8(carry) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => carry.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = carry.split_off(carry.len() - keep);
    let text = String::from_utf8_lossy(carry).into_owned();
    *carry = rest;
    text
}

/// A command's own `limits` (`memory_bytes`, `processes`: the request's fields of those names,
/// each at most the session's, checked by the session); the other limits are the session's.
fn own_limits(mut cmd: Command, l: Map<String, Value>) -> Result<Command, (&'static str, String)> {
    for (k, v) in l {
        let n = v.as_u64();
        match (k.as_str(), n) {
            ("memory_bytes", Some(n)) => cmd = cmd.memory(n),
            ("processes", Some(n)) => cmd = cmd.processes(n),
            ("memory_bytes", None) => {
                return Err((
                    "limits.memory_bytes",
                    "must be a whole number of bytes".into(),
                ))
            }
            ("processes", None) => {
                return Err(("limits.processes", "must be a whole number".into()))
            }
            _ => {
                return Err((
                    "limits",
                    format!(
                        "`{}` is not a command's own: a command may set memory_bytes and \
                         processes; the other limits are the session's",
                        k.escape_debug()
                    ),
                ))
            }
        }
    }
    Ok(cmd)
}
