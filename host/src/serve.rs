//! `sandbox serve`: one long-lived host that runs many exec requests, read as JSON lines from
//! stdin or from the connections of a unix socket.
//!
//! Each line is an exec request (`docs/exec.md`) plus an `id`; each request gets exactly one
//! line back on the stream it came from: its result with the `id`, or an error naming the
//! field. Requests run concurrently on a fixed pool of worker threads through
//! [`crate::exec::exec_with`]; results are written in completion order, one whole line at a
//! time. EOF on stdin waits for the running requests; SIGTERM or SIGINT cancels them (their
//! process trees are killed and their results say `cancelled`); a socket client that goes away
//! has its own requests cancelled. See `docs/serve.md`.

use crate::exec::json::{parse_with_id, MAX_REQUEST_BYTES};
use crate::exec::{exec_with, Cancel, RunOptions};
use crate::exec::{ExecError, Request};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};

/// Most requests that may run at once (`--max-concurrent`).
pub const MAX_CONCURRENT: usize = 1024;
/// Most socket connections served at once; more are answered with an error line and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// How much of a line is read at a time: longer lines are assembled up to
/// [`MAX_REQUEST_BYTES`] and anything beyond is discarded unread into memory.
const READ_CHUNK: usize = 64 * 1024;

/// What `sandbox serve` was asked to do.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Requests run at once (1 to [`MAX_CONCURRENT`]).
    pub max_concurrent: usize,
    /// Listen on this unix socket instead of reading stdin.
    pub socket: Option<PathBuf>,
    /// The engine's settings for every request (its `cancel` is replaced by the server's).
    pub run: RunOptions,
}

impl ServeOptions {
    /// Serve stdin with one request per CPU.
    pub fn new() -> ServeOptions {
        ServeOptions {
            max_concurrent: default_concurrency(),
            socket: None,
            run: RunOptions::default(),
        }
    }
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions::new()
    }
}

/// Why the server could not start (or stop cleanly).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A bad option value: the option, the value given, and what it must be.
    #[error("{option}: {reason}, got `{}`", value.escape_debug())]
    Option {
        /// The option as given: `--max-concurrent` on the command line, `max_concurrent`
        /// in [`ServeOptions`].
        option: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        reason: String,
    },
    /// The socket could not be created safely.
    #[error("socket {path}: {reason}")]
    Socket {
        /// The `--socket` path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A system resource the server needs (eventfd, signal handler, thread).
    #[error("cannot start the server: {0}")]
    Setup(std::io::Error),
}

/// The number of CPUs this process may use (the default `--max-concurrent`).
pub fn default_concurrency() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(MAX_CONCURRENT)
}

/// Parses a `--max-concurrent` value: an integer from 1 to [`MAX_CONCURRENT`].
#[doc(hidden)]
pub fn parse_max_concurrent(text: &str) -> Result<usize, ServeError> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_CONCURRENT).contains(&n) => Ok(n),
        _ => Err(ServeError::Option {
            option: "--max-concurrent",
            value: text.to_string(),
            reason: format!("must be an integer from 1 to {MAX_CONCURRENT}"),
        }),
    }
}

/// Runs the server until EOF on stdin (stdin mode) or a SIGTERM/SIGINT (both modes).
///
/// Installs handlers for SIGTERM and SIGINT for its duration (the previous ones are restored
/// on return). Returns once every request it accepted has been answered (or its client has
/// gone away); the socket, if any, is removed.
pub fn serve(opts: &ServeOptions) -> Result<(), ServeError> {
    if !(1..=MAX_CONCURRENT).contains(&opts.max_concurrent) {
        return Err(ServeError::Option {
            option: "max_concurrent",
            value: opts.max_concurrent.to_string(),
            reason: format!("must be from 1 to {MAX_CONCURRENT}"),
        });
    }
    // The socket first: it is the step most likely to be refused, and nothing else exists yet
    // while the umask is narrowed.
    let listener = opts.socket.as_deref().map(Socket::create).transpose()?;
    let signals = Signals::install().map_err(ServeError::Setup)?;
    let wake = EventFd::new().map_err(ServeError::Setup)?;
    let server = Arc::new(Server {
        shutting_down: AtomicBool::new(false),
        wake,
        run: opts.run.clone(),
    });
    let (jobs, queue) = sync_channel::<Job>(opts.max_concurrent);
    let queue = Arc::new(Mutex::new(queue));
    for i in 0..opts.max_concurrent {
        let queue = Arc::clone(&queue);
        let server = Arc::clone(&server);
        std::thread::Builder::new()
            .name(format!("sandbox-serve-{i}"))
            .spawn(move || worker(&server, &queue))
            .map_err(ServeError::Setup)?;
    }
    let res = match &listener {
        None => serve_stdin(&server, jobs, &signals),
        Some(sock) => serve_socket(&server, jobs, &signals, sock),
    };
    drop(listener);
    drop(signals);
    res
}

/// State shared by every thread of the server.
struct Server {
    /// Set once by a signal: no request starts any more.
    shutting_down: AtomicBool,
    /// Wakes the main loop: a stream finished reading, or its last request was answered.
    wake: EventFd,
    run: RunOptions,
}

/// One accepted request on its way to a worker.
struct Job {
    conn: Arc<Conn>,
    id: String,
    req: Request,
}

/// Where a stream's result lines go.
enum Output {
    Stdout(File),
    Socket(Arc<UnixStream>),
}

/// One JSON-lines stream: stdin and stdout, or one socket connection.
struct Conn {
    output: Output,
    /// Whether lines can still be written; the lock makes each line one uninterrupted write.
    writable: Mutex<bool>,
    /// Cancels every running request of this stream (client gone, server shutting down).
    cancel: Cancel,
    cancelled: AtomicBool,
    /// Requests accepted and not yet answered.
    pending: AtomicUsize,
    /// The reader saw EOF (or gave up): no more requests will come.
    reader_done: AtomicBool,
    /// Ends the stream's sessions when its requests are cancelled (their commands are owed
    /// answers too, which only their end pays).
    sessions: Mutex<Option<crate::session::serve_ops::Ender>>,
}

impl Conn {
    fn new(output: Output) -> std::io::Result<Conn> {
        Ok(Conn {
            output,
            writable: Mutex::new(true),
            cancel: Cancel::new()?,
            cancelled: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            reader_done: AtomicBool::new(false),
            sessions: Mutex::new(None),
        })
    }

    /// The descriptor the main loop watches for the other side going away.
    fn watched(&self) -> RawFd {
        match &self.output {
            Output::Stdout(f) => f.as_raw_fd(),
            Output::Socket(s) => s.as_raw_fd(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        self.writable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one line (which ends in a newline) in one call under the stream's lock; a
    /// stream that cannot be written to any more has its requests cancelled.
    fn write_line(&self, line: &[u8]) {
        let mut writable = self.lock();
        if !*writable {
            return;
        }
        let res = match &self.output {
            Output::Stdout(f) => (&*f).write_all(line),
            Output::Socket(s) => (&**s).write_all(line),
        };
        if let Err(e) = res {
            tracing::debug!(target: "sandbox::serve", error = %e, "result stream closed");
            *writable = false;
            drop(writable);
            self.cancel_all();
        }
    }

    fn cancel_all(&self) {
        if !self.cancelled.swap(true, SeqCst) {
            self.cancel.cancel();
            // On a thread of its own: this may be a session command's thread writing its
            // output, which ending the session waits for.
            let ender = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(e) = ender {
                let _ = std::thread::Builder::new()
                    .name("sandbox-serve-end".into())
                    .spawn(move || e.end_all());
            }
        }
    }

    /// Every request read has been answered and no more will be read.
    fn finished(&self) -> bool {
        self.reader_done.load(SeqCst) && self.pending.load(SeqCst) == 0
    }

    /// One request was answered; wakes the main loop when that may end the stream or the
    /// shutdown.
    fn answered(&self, server: &Server) {
        if self.pending.fetch_sub(1, SeqCst) == 1
            && (self.reader_done.load(SeqCst) || server.shutting_down.load(SeqCst))
        {
            server.wake.notify();
        }
    }
}

/// A result line: the exec result object with `"id"` first.
fn result_line(id: &str, result: &crate::exec::ExecResult) -> Vec<u8> {
    let body = match serde_json::to_vec(result) {
        Ok(b) => b,
        Err(e) => return error_line(Some(id), "result", &format!("cannot encode it: {e}")),
    };
    let id = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
    let mut line = Vec::with_capacity(body.len() + id.len() + 8);
    line.extend_from_slice(b"{\"id\":");
    line.extend_from_slice(&id);
    // `body` is a non-empty object (`{"exit_code":...}`): splice its members after the id.
    line.push(b',');
    line.extend_from_slice(&body[1..]);
    line.push(b'\n');
    line
}

/// `{"id": ID or null, "error": {"field": F, "reason": R}}` and a newline.
fn error_line(id: Option<&str>, field: &str, reason: &str) -> Vec<u8> {
    // Built by hand so that `id` comes first, as in result lines.
    let text = |s: &str| serde_json::Value::from(s).to_string();
    let id = id.map_or_else(|| "null".to_string(), text);
    format!(
        "{{\"id\":{id},\"error\":{{\"field\":{},\"reason\":{}}}}}\n",
        text(field),
        text(reason)
    )
    .into_bytes()
}

/// An error line of a request that was run; a program that could not be started also carries
/// the shell's status (`"exit_code": 126` or `127`) after the reason.
fn exec_error_line(id: &str, e: &ExecError) -> Vec<u8> {
    let mut line = error_line(Some(id), e.field(), &e.reason());
    if let Some(code) = e.exit_code() {
        // `...}}\n` becomes `...,"exit_code":N}}\n`.
        line.truncate(line.len() - 3);
        line.extend_from_slice(format!(",\"exit_code\":{code}}}}}\n").as_bytes());
    }
    line
}

const SHUTTING_DOWN: &str = "not run: the server is shutting down";

fn worker(server: &Server, queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let q = queue.lock().unwrap_or_else(|e| e.into_inner());
            match q.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        let conn = &job.conn;
        let line = if server.shutting_down.load(SeqCst) {
            Some(error_line(Some(&job.id), "request", SHUTTING_DOWN))
        } else if conn.cancelled.load(SeqCst) {
            // Its client went away: nobody to run it for.
            None
        } else {
            let opts = RunOptions {
                cancel: Some(conn.cancel.clone()),
                ..server.run.clone()
            };
            Some(match exec_with(&job.req, &opts) {
                Ok(r) => result_line(&job.id, &r),
                Err(e) => exec_error_line(&job.id, &e),
            })
        };
        if let Some(line) = line {
            conn.write_line(&line);
        }
        conn.answered(server);
    }
}

/// One line of input, or the length of a line too long to keep.
enum Line {
    Text(Vec<u8>),
    TooLong(u64),
}

/// Reads the next line (without its newline), keeping at most [`MAX_REQUEST_BYTES`] of it in
/// memory: the rest of a longer line is read in chunks and dropped up to the next newline.
/// `None` at EOF or on a read error.
fn next_line(input: &mut impl BufRead) -> Option<Line> {
    let mut kept: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if buf.is_empty() {
            // EOF: a last line without its newline still counts.
            return (total > 0).then(|| finish_line(kept, total));
        }
        let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        total += chunk.len() as u64;
        if total <= MAX_REQUEST_BYTES as u64 {
            kept.extend_from_slice(chunk);
        } else if !kept.is_empty() {
            kept = Vec::new();
        }
        let used = end.unwrap_or(buf.len());
        input.consume(used);
        if end.is_some() {
            return Some(finish_line(kept, total));
        }
    }
}

fn finish_line(kept: Vec<u8>, total: u64) -> Line {
    if total > MAX_REQUEST_BYTES as u64 {
        Line::TooLong(total)
    } else {
        Line::Text(kept)
    }
}

/// Reads one stream's requests until EOF, answering bad lines at once and queueing the rest.
/// Session operations write through the connection and count their result lines as owed
/// answers, so that EOF waits for running commands as it waits for requests.
struct ConnSink {
    conn: Arc<Conn>,
    server: Arc<Server>,
}

impl crate::session::serve_ops::Sink for ConnSink {
    fn line(&self, line: &[u8]) {
        self.conn.write_line(line);
    }
    fn owe(&self) {
        self.conn.pending.fetch_add(1, SeqCst);
    }
    fn paid(&self) {
        self.conn.answered(&self.server);
    }
}

fn reader(
    server: &Arc<Server>,
    conn: &Arc<Conn>,
    input: &mut impl BufRead,
    jobs: &SyncSender<Job>,
) {
    let mut ops = crate::session::serve_ops::Ops::new(Arc::new(ConnSink {
        conn: Arc::clone(conn),
        server: Arc::clone(server),
    }));
    *conn.sessions.lock().unwrap_or_else(|e| e.into_inner()) = Some(ops.ender());
    while !server.shutting_down.load(SeqCst) && !conn.cancelled.load(SeqCst) {
        let Some(line) = next_line(input) else { break };
        let text = match line {
            Line::TooLong(n) => {
                let reason = format!("larger than {MAX_REQUEST_BYTES} bytes ({n} bytes)");
                tracing::info!(target: "sandbox::serve", outcome = "refused", field = "request", reason = %reason, "serve");
                conn.write_line(&error_line(None, "request", &reason));
                continue;
            }
            Line::Text(t) => t,
        };
        // Blank lines (a trailing `\r\n`, an empty keep-alive) are not requests.
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if ops.handle(&text) {
            continue;
        }
        let (id, parsed) = parse_with_id(&text);
        drop(text);
        let (id, req) = match (id, parsed) {
            (Some(id), Ok(req)) => (id, req),
            (id, res) => {
                let r = res.err().unwrap_or_else(|| {
                    crate::exec::Refusal::new(
                        "id",
                        "missing (a string naming the request in its result)",
                    )
                });
                tracing::info!(target: "sandbox::serve", outcome = "refused", field = %r.field, reason = %r.reason, "serve");
                conn.write_line(&error_line(id.as_deref(), &r.field, &r.reason));
                continue;
            }
        };
        // Counted before the shutdown check: the main loop sets the flag and then waits for
        // `pending` to drop to zero, so one of the two sides always sees the other.
        conn.pending.fetch_add(1, SeqCst);
        if server.shutting_down.load(SeqCst) {
            conn.write_line(&error_line(Some(&id), "request", SHUTTING_DOWN));
            conn.answered(server);
            break;
        }
        let job = Job {
            conn: Arc::clone(conn),
            id,
            req,
        };
        if jobs.send(job).is_err() {
            conn.pending.fetch_sub(1, SeqCst);
            break;
        }
    }
    // EOF waits for the running session commands as it waits for requests: the sessions
    // (ended when `ops` goes) stay until every owed answer is written, or the stream's
    // requests are cancelled (a shutdown, a reader of the results gone), which ends them.
    while conn.pending.load(SeqCst) > 0
        && !conn.cancelled.load(SeqCst)
        && !server.shutting_down.load(SeqCst)
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(ops);
    conn.reader_done.store(true, SeqCst);
    server.wake.notify();
}

fn spawn_reader(
    server: &Arc<Server>,
    conn: &Arc<Conn>,
    jobs: &SyncSender<Job>,
    mut input: impl BufRead + Send + 'static,
) -> std::io::Result<()> {
    let (server, conn, jobs) = (Arc::clone(server), Arc::clone(conn), jobs.clone());
    std::thread::Builder::new()
        .name("sandbox-serve-read".into())
        .spawn(move || reader(&server, &conn, &mut input, &jobs))
        .map(drop)
}

/// Waits until one of `fds` reports something; after an interruption none has.
fn poll(fds: &mut [libc::pollfd]) {
    if crate::sys::poll(fds).is_err() {
        // EINTR (a signal): the signal's eventfd is polled on the next round.
        for p in fds.iter_mut() {
            p.revents = 0;
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn serve_stdin(
    server: &Arc<Server>,
    jobs: SyncSender<Job>,
    signals: &Signals,
) -> Result<(), ServeError> {
    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(ServeError::Setup)?;
    let conn = Arc::new(Conn::new(Output::Stdout(File::from(stdout))).map_err(ServeError::Setup)?);
    let stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(ServeError::Setup)?;
    let input = BufReader::with_capacity(READ_CHUNK, File::from(stdin));
    spawn_reader(server, &conn, &jobs, input).map_err(ServeError::Setup)?;
    drop(jobs);
    let mut watch_output = true;
    loop {
        let mut fds = vec![
            pollfd(signals.fd(), libc::POLLIN),
            pollfd(server.wake.raw(), libc::POLLIN),
        ];
        if watch_output {
            // No events asked: only POLLERR/POLLHUP, i.e. nobody reads the results any more.
            fds.push(pollfd(conn.watched(), 0));
        }
        poll(&mut fds);
        if fds[0].revents != 0 {
            shutdown(server, std::slice::from_ref(&conn), signals);
            return Ok(());
        }
        if fds[1].revents != 0 {
            server.wake.drain();
        }
        if fds.get(2).is_some_and(|p| p.revents != 0) {
            // The reader of our stdout went away: results cannot be delivered, so the running
            // requests are cancelled, and the server stops once they are answered.
            watch_output = false;
            *conn.lock() = false;
            conn.cancel_all();
            conn.reader_done.store(true, SeqCst);
        }
        if conn.finished() {
            return Ok(());
        }
    }
}

/// One accepted connection as the main loop tracks it.
struct Client {
    conn: Arc<Conn>,
    socket: Arc<UnixStream>,
    /// Its peer went away (the main loop no longer watches it).
    gone: bool,
}

fn serve_socket(
    server: &Arc<Server>,
    jobs: SyncSender<Job>,
    signals: &Signals,
    sock: &Socket,
) -> Result<(), ServeError> {
    let mut clients: Vec<Client> = Vec::new();
    let uid = crate::sys::euid();
    loop {
        let mut fds = vec![
            pollfd(signals.fd(), libc::POLLIN),
            pollfd(server.wake.raw(), libc::POLLIN),
            pollfd(sock.listener.as_raw_fd(), libc::POLLIN),
        ];
        let watched: Vec<usize> = (0..clients.len()).filter(|&i| !clients[i].gone).collect();
        for &i in &watched {
            fds.push(pollfd(clients[i].socket.as_raw_fd(), 0));
        }
        poll(&mut fds);
        if fds[0].revents != 0 {
            for c in &clients {
                // Wakes a reader blocked in read(): it sees EOF and stops.
                let _ = c.socket.shutdown(std::net::Shutdown::Read);
            }
            let conns: Vec<Arc<Conn>> = clients.iter().map(|c| Arc::clone(&c.conn)).collect();
            shutdown(server, &conns, signals);
            return Ok(());
        }
        if fds[1].revents != 0 {
            server.wake.drain();
        }
        for (k, &i) in watched.iter().enumerate() {
            if fds[3 + k].revents != 0 {
                // The client closed its end: nobody will read these results.
                clients[i].gone = true;
                clients[i].conn.cancel_all();
            }
        }
        clients.retain(|c| !c.conn.finished());
        if fds[2].revents != 0 {
            if let Some(c) = accept(server, &jobs, &sock.listener, uid, clients.len()) {
                clients.push(c);
            }
        }
    }
}

/// Accepts one connection and starts its reader, or refuses it.
fn accept(
    server: &Arc<Server>,
    jobs: &SyncSender<Job>,
    listener: &UnixListener,
    uid: libc::uid_t,
    live: usize,
) -> Option<Client> {
    let (stream, _) = match listener.accept() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(target: "sandbox::serve", error = %e, "accept failed");
            return None;
        }
    };
    let refuse = |stream: &UnixStream, reason: &str| {
        let _ = (&*stream).write_all(&error_line(None, "connection", reason));
        let _ = stream.shutdown(std::net::Shutdown::Write);
    };
    match peer_cred(&stream) {
        Ok(cred) if cred.uid == uid => {
            let pidfd = crate::sys::peer_pidfd(stream.as_fd()).ok();
            if let Some(refused) = crate::peer::refusal(cred.pid, pidfd.as_ref().map(|f| f.as_fd()))
            {
                let why = match refused {
                    crate::peer::Refused::Sandboxed(why) => {
                        crate::escape::eprint_line(format_args!("sandbox: serve: refused a connection from a sandboxed command: {why}; requests must come from outside the sandbox"));
                        why
                    }
                    // Refused quietly: e.g. a second `serve` that probed whether one listens and
                    // has already exited; nobody is left to act on a message.
                    crate::peer::Refused::Departed(why) => why,
                };
                refuse(
                    &stream,
                    &format!("refused: {why}; a sandboxed command may not submit requests"),
                );
                close_refused(stream);
                return None;
            }
        }
        Ok(cred) => {
            crate::escape::eprint_line(format_args!(
                "sandbox: serve: refused a connection from uid {} (pid {}): only uid {uid} may connect",
                cred.uid, cred.pid
            ));
            refuse(
                &stream,
                "refused: this server accepts connections from its own uid only",
            );
            close_refused(stream);
            return None;
        }
        Err(e) => {
            crate::escape::eprint_line(format_args!("sandbox: serve: refused a connection: cannot read its peer's credentials (SO_PEERCRED): {e}"));
            return None;
        }
    }
    if live >= MAX_CONNECTIONS {
        refuse(
            &stream,
            &format!("refused: {MAX_CONNECTIONS} connections are open already"),
        );
        close_refused(stream);
        return None;
    }
    let socket = Arc::new(stream);
    let start = || -> std::io::Result<Client> {
        let conn = Arc::new(Conn::new(Output::Socket(Arc::clone(&socket)))?);
        let input = BufReader::with_capacity(READ_CHUNK, SharedStream(Arc::clone(&socket)));
        spawn_reader(server, &conn, jobs, input)?;
        Ok(Client {
            conn,
            socket: Arc::clone(&socket),
            gone: false,
        })
    };
    match start() {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(target: "sandbox::serve", error = %e, "cannot serve a connection");
            refuse(&socket, &format!("refused: cannot serve it: {e}"));
            None
        }
    }
}

/// Closes a refused connection without resetting it: a client that sent its request before
/// reading would otherwise get ECONNRESET in place of the refusal line. What it sent is read
/// and dropped (at most 1 MiB, for at most 2 s) on a thread of its own, so the accept loop
/// does not wait for it. At most 16 such threads at once: past that a refused connection is
/// simply closed (a flood of refused peers cannot make the server start threads without end).
fn close_refused(stream: UnixStream) {
    use std::io::Read;
    static DRAINING: AtomicUsize = AtomicUsize::new(0);
    if DRAINING.fetch_add(1, SeqCst) >= 16 {
        DRAINING.fetch_sub(1, SeqCst);
        return;
    }
    let drain = move || {
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        let mut buf = [0u8; 8192];
        let mut left: usize = 1 << 20;
        while left > 0 {
            match (&stream).read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
        DRAINING.fetch_sub(1, SeqCst);
    };
    if std::thread::Builder::new()
        .name("serve-refused".into())
        .spawn(drain)
        .is_err()
    {
        DRAINING.fetch_sub(1, SeqCst);
    }
}

/// A connection's read side, shared with its writers.
struct SharedStream(Arc<UnixStream>);

impl std::io::Read for SharedStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self.0).read(buf)
    }
}

/// Stops taking requests, cancels the running ones, and waits until each has its answer.
fn shutdown(server: &Server, conns: &[Arc<Conn>], signals: &Signals) {
    tracing::info!(target: "sandbox::serve", signal = signals.which(), "shutting down");
    server.shutting_down.store(true, SeqCst);
    for c in conns {
        c.cancel_all();
    }
    while conns.iter().any(|c| c.pending.load(SeqCst) > 0) {
        let mut fds = [pollfd(server.wake.raw(), libc::POLLIN)];
        poll(&mut fds);
        server.wake.drain();
    }
}

/// The peer's credentials as the kernel recorded them at `connect`.
fn peer_cred(stream: &UnixStream) -> std::io::Result<libc::ucred> {
    crate::sys::peer_cred(stream.as_fd())
}

/// The listening socket; removed (if it is still ours) when dropped.
struct Socket {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the socket file we created.
    identity: (u64, u64),
}

impl Socket {
    fn create(path: &Path) -> Result<Socket, ServeError> {
        let fail = |reason: String| ServeError::Socket {
            path: path.to_path_buf(),
            reason,
        };
        if path.as_os_str().is_empty() {
            return Err(fail("must not be empty".into()));
        }
        // sun_path holds 108 bytes with the terminating NUL.
        if path.as_os_str().len() > 107 {
            return Err(fail(format!(
                "longer than 107 bytes ({} bytes), the limit of a unix socket address",
                path.as_os_str().len()
            )));
        }
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    // Nobody listens: a socket left by a server that died. Replace it.
                    std::fs::remove_file(path)
                        .map_err(|e| fail(format!("cannot remove the stale socket: {e}")))?;
                }
                Ok(_) => return Err(fail("another server is listening on it".into())),
                Err(e) => return Err(fail(format!("exists and cannot be checked: {e}"))),
            },
            Ok(_) => {
                return Err(fail(
                    "exists and is not a socket (remove it or choose another path)".into(),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("cannot check it: {e}"))),
        }
        // Created under umask 0177, the socket is 0600 from its first moment: there is no
        // window in which another user could connect. The umask is process-wide; no other
        // thread of the server exists yet.
        let old = crate::sys::set_umask(0o177);
        let bound = UnixListener::bind(path);
        crate::sys::set_umask(old);
        let listener = bound.map_err(|e| fail(format!("cannot listen on it: {e}")))?;
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| fail(format!("cannot check the new socket: {e}")))?;
        let socket = Socket {
            listener,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
        };
        if meta.mode() & 0o777 != 0o600 {
            // Dropping `socket` removes it.
            return Err(fail(format!(
                "was created with mode {:o} instead of 600",
                meta.mode() & 0o777
            )));
        }
        Ok(socket)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Only our own socket: a file another server put there since is left alone.
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.file_type().is_socket() && (m.dev(), m.ino()) == self.identity {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// A counter descriptor threads (and a signal handler) use to wake the main loop.
struct EventFd(OwnedFd);

impl EventFd {
    fn new() -> std::io::Result<EventFd> {
        crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK).map(EventFd)
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    fn notify(&self) {
        crate::sys::eventfd_add_one(self.raw());
    }

    fn drain(&self) {
        crate::sys::eventfd_drain(self.0.as_fd());
    }
}

/// The eventfd the signal handler writes to (-1: none), and the last signal caught.
static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);
static SIGNAL_NO: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL_NO.store(sig, SeqCst);
    let fd = SIGNAL_FD.load(SeqCst);
    if fd < 0 {
        return;
    }
    crate::sys::eventfd_add_one(fd);
}

/// SIGTERM and SIGINT turned into readiness of an eventfd, for the main loop's poll.
struct Signals {
    event: EventFd,
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        let event = EventFd::new()?;
        SIGNAL_FD.store(event.raw(), SeqCst);
        SIGNAL_NO.store(0, SeqCst);
        let mut signals = Signals {
            event,
            previous: Vec::new(),
        };
        for sig in [libc::SIGTERM, libc::SIGINT] {
            let old = crate::sys::catch_signal(sig, on_signal)?;
            signals.previous.push((sig, old));
        }
        Ok(signals)
    }

    fn fd(&self) -> RawFd {
        self.event.raw()
    }

    /// The signal that asked for the shutdown (0 if none).
    fn which(&self) -> i32 {
        SIGNAL_NO.load(SeqCst)
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            crate::sys::restore_signal(*sig, old);
        }
        SIGNAL_FD.store(-1, SeqCst);
    }
}
