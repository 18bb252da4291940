//! The server's one session and the processes the session tools keep in it: started by the
//! first `start`, ended by `session_end` or when the client disconnects.
//!
//! Each process's output is drained by a thread of its own into a buffer per stream, capped
//! at the policy's `max_output_bytes` of unread text: past the cap the oldest unread bytes
//! are dropped and counted, so a server that logs for hours keeps its latest lines and never
//! grows the host's memory. When the process has ended, its result waits in the table until a
//! call has reported it; then its id is forgotten.

use crate::exec::{ExecError, ExecResult, Refusal, Request, Step};
use crate::session::{Command, Event, Process, Session, SessionOptions};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most processes kept at once (running, or ended and not yet read): a bound on the host's
/// threads and buffers per server, besides the session's own pids limit.
pub const MAX_PROCESSES: usize = 16;

/// The session and its processes.
pub struct Procs {
    /// The session's policy: the server's, with the engine's longest timeout as each
    /// command's default (a background process lives until it is ended, within a day).
    policy: Request,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    session: Option<Arc<Session>>,
    table: BTreeMap<u64, Arc<Entry>>,
    /// Ids are the server's, never reused: an old id never names a new process.
    next: u64,
}

/// One process of the table.
pub struct Entry {
    /// Its id in the tools.
    pub id: u64,
    /// What it runs.
    pub argv: Vec<String>,
    started: Instant,
    /// Its wall-clock limit in seconds.
    timeout_s: f64,
    process: Arc<Process>,
    out: Mutex<Buffers>,
    changed: Condvar,
}

/// Unread output and, once the process has ended, its result.
#[derive(Default)]
struct Buffers {
    stdout: Unread,
    stderr: Unread,
    result: Option<ExecResult>,
}

/// One stream's unread bytes, at most `cap`, and how many were dropped since the last read.
#[derive(Default)]
struct Unread {
    bytes: Vec<u8>,
    dropped: u64,
}

impl Unread {
    fn push(&mut self, chunk: &[u8], cap: usize) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > cap {
            let mut cut = self.bytes.len() - cap;
            // Cut at a character's start, so that the kept text does not open with half of one.
            while cut < self.bytes.len() && self.bytes[cut] & 0xc0 == 0x80 {
                cut += 1;
            }
            self.bytes.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// The unread text and the dropped count, emptied. While the process runs, an incomplete
    /// character at the end stays for the next read (its rest is still to come).
    fn take(&mut self, ended: bool) -> (String, u64) {
        let keep = if ended {
            0
        } else {
            match std::str::from_utf8(&self.bytes) {
                Err(e) if e.error_len().is_none() => self.bytes.len() - e.valid_up_to(),
                _ => 0,
            }
        };
        let rest = self.bytes.split_off(self.bytes.len() - keep);
        let text = String::from_utf8_lossy(&std::mem::replace(&mut self.bytes, rest)).into_owned();
        (text, std::mem::take(&mut self.dropped))
    }
}

/// What a read found.
pub struct Snapshot {
    /// The process's id.
    pub id: u64,
    /// New standard output since the last read.
    pub stdout: String,
    /// New standard error since the last read.
    pub stderr: String,
    /// Bytes of stdout dropped since the last read (the buffer was full).
    pub stdout_dropped: u64,
    /// Bytes of stderr dropped since the last read.
    pub stderr_dropped: u64,
    /// The result, when the process has ended (reported once; the id is then forgotten).
    pub result: Option<ExecResult>,
    /// Its wall-clock limit in seconds (for the words of a timeout).
    pub timeout_s: f64,
}

/// One row of `list`.
pub struct Row {
    /// The id.
    pub id: u64,
    /// What it runs.
    pub argv: Vec<String>,
    /// Seconds since it started.
    pub age_s: f64,
    /// Its exit status and signal once it has ended.
    pub ended: Option<(Option<i32>, Option<i32>)>,
    /// Unread bytes of output.
    pub unread: usize,
}

fn refused(field: &str, why: impl Into<String>) -> ExecError {
    ExecError::Refused(Refusal::new(field, why.into()))
}

impl Procs {
    /// No session yet; `policy` is the server's template.
    pub fn new(policy: &Request) -> Procs {
        let mut policy = policy.clone();
        policy.timeout_s = crate::exec::MAX_TIMEOUT_S;
        policy.stdin = None;
        Procs {
            policy,
            state: Mutex::new(State {
                next: 1,
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session when one is live (`run` and `shell` then run in it).
    pub fn live(&self) -> Option<Arc<Session>> {
        self.lock().session.clone().filter(|s| !s.is_ended())
    }

    /// Starts `argv` in the session (started now if there is none), its wall-clock limit
    /// `timeout` or else the policy's longest.
    pub fn start(&self, argv: Vec<String>, timeout: Option<Duration>) -> Result<u64, ExecError> {
        let mut st = self.lock();
        if st.table.len() >= MAX_PROCESSES {
            // Room is made by forgetting the oldest process that has ended and not been read.
            let oldest_ended = st
                .table
                .values()
                .find(|e| e.lock().result.is_some())
                .map(|e| e.id);
            match oldest_ended {
                Some(id) => {
                    st.table.remove(&id);
                }
                None => {
                    return Err(refused(
                        "start",
                        format!(
                            "{MAX_PROCESSES} processes are running, the most this server keeps; \
                             end one (signal KILL) or all of them (session_end)"
                        ),
                    ))
                }
            }
        }
        let session = match st.session.clone().filter(|s| !s.is_ended()) {
            Some(s) => s,
            None => {
                let exe = std::env::current_exe().map_err(Step::Session.error())?;
                let mut options = SessionOptions::new(exe);
                // The policy came from `sandbox mcp`'s flags, as its one-shot runs' did.
                options.audience = crate::exec::Audience::Cli;
                let s = Arc::new(Session::start(&self.policy, &options)?);
                st.session = Some(Arc::clone(&s));
                s
            }
        };
        let mut cmd = Command::new(argv.clone()).stream(true);
        if let Some(t) = timeout {
            cmd = cmd.timeout(t);
        }
        let process = Arc::new(session.spawn(&cmd)?);
        let id = st.next;
        st.next += 1;
        let entry = Arc::new(Entry {
            id,
            argv,
            started: Instant::now(),
            timeout_s: timeout.map_or(self.policy.timeout_s, |t| t.as_secs_f64()),
            process,
            out: Mutex::new(Buffers::default()),
            changed: Condvar::new(),
        });
        let cap = self.policy.max_output_bytes as usize;
        let drain = Arc::clone(&entry);
        std::thread::Builder::new()
            .name("sandbox-mcp-output".into())
            .spawn(move || drain.drain(cap))
            .map_err(Step::Command.error())?;
        st.table.insert(id, entry);
        Ok(id)
    }

    /// The process `id`; `Err`: a line naming the id and what is known.
    pub fn get(&self, id: u64) -> Result<Arc<Entry>, String> {
        self.lock().table.get(&id).cloned().ok_or_else(|| {
            format!(
                "process_id: no process {id} (never started, or it ended and its result was \
                 read, or the session ended); list shows the processes"
            )
        })
    }

    /// Reads process `id` (waiting up to `wait` for output or its end); a result reported
    /// forgets the id.
    pub fn read(&self, entry: &Entry, wait: Duration) -> Snapshot {
        let snap = entry.read(wait);
        if snap.result.is_some() {
            self.lock().table.remove(&entry.id);
        }
        snap
    }

    /// The processes, oldest first.
    pub fn list(&self) -> Vec<Row> {
        let table: Vec<Arc<Entry>> = self.lock().table.values().cloned().collect();
        table
            .iter()
            .map(|e| {
                let b = e.lock();
                Row {
                    id: e.id,
                    argv: e.argv.clone(),
                    age_s: e.started.elapsed().as_secs_f64(),
                    ended: b.result.as_ref().map(|r| (r.exit_code, r.signal)),
                    unread: b.stdout.bytes.len() + b.stderr.bytes.len(),
                }
            })
            .collect()
    }

    /// Ends the session: every process in it is killed and reaped, the table emptied.
    /// Returns whether there was a session and how many processes were kept.
    pub fn end(&self) -> (bool, usize) {
        let (session, table) = {
            let mut st = self.lock();
            (st.session.take(), std::mem::take(&mut st.table))
        };
        let had = session.is_some();
        if let Some(s) = session {
            s.end();
        }
        (had, table.len())
    }
}

impl Entry {
    fn lock(&self) -> MutexGuard<'_, Buffers> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The process itself (stdin, signals).
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// Whether it has ended (its result is waiting to be read).
    pub fn ended(&self) -> bool {
        self.lock().result.is_some()
    }

    /// Moves the process's output into the buffers until it ends, then its result.
    fn drain(&self, cap: usize) {
        for ev in self.process.events() {
            let mut b = self.lock();
            match ev {
                Event::Stdout(c) => b.stdout.push(&c, cap),
                Event::Stderr(c) => b.stderr.push(&c, cap),
            }
            drop(b);
            self.changed.notify_all();
        }
        // The events end when the command has ended; only this thread takes its result.
        let Some(result) = self.process.finish() else {
            return;
        };
        self.lock().result = Some(result);
        self.changed.notify_all();
    }

    fn read(&self, wait: Duration) -> Snapshot {
        let deadline = Instant::now() + wait;
        let mut b = self.lock();
        while b.stdout.bytes.is_empty() && b.stderr.bytes.is_empty() && b.result.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            b = self
                .changed
                .wait_timeout(b, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let ended = b.result.is_some();
        let (stdout, stdout_dropped) = b.stdout.take(ended);
        let (stderr, stderr_dropped) = b.stderr.take(ended);
        Snapshot {
            id: self.id,
            stdout,
            stderr,
            stdout_dropped,
            stderr_dropped,
            result: b.result.take(),
            timeout_s: self.timeout_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Unread;

    #[test]
    fn the_oldest_unread_bytes_are_dropped_at_the_cap() {
        let mut u = Unread::default();
        u.push(b"0123456789", 4);
        assert_eq!(u.take(false), ("6789".to_string(), 6));
        assert_eq!(u.take(false), (String::new(), 0));
        // The cut moves past a character's continuation bytes.
        u.push("aé".as_bytes(), 2);
        assert_eq!(u.take(false), ("é".to_string(), 1));
        u.push("xé".as_bytes(), 1);
        assert_eq!(u.take(true), (String::new(), 3));
    }

    #[test]
    fn half_a_character_waits_for_its_rest() {
        let mut u = Unread::default();
        let e = "é".as_bytes();
        u.push(&[b'a', e[0]], 16);
        assert_eq!(u.take(false).0, "a");
        u.push(&e[1..], 16);
        assert_eq!(u.take(false).0, "é");
    }
}
