//! `sandbox run`'s standard error, passed through the host so that refusals can be named.
//!
//! `run` hands the program the host's own streams. When the host's stderr is a terminal it
//! stays so (the program keeps its colours, progress bars and `isatty(2)`), and nothing is
//! seen. Otherwise (an agent's pipe, a log file) the program's stderr is a pipe the host
//! reads on a thread of its own and copies to its stderr unchanged, keeping only the lines
//! that hold a refusal's text (module `refusals`) and the few before each, at most
//! [`super::refusals::MAX_KEPT`] bytes. When the host's stdout and stderr are one file
//! (`2>&1`), the program gets the same pipe for both, so the order of its two streams is kept
//! exactly (and its stdout is searched too).
//!
//! The thread writes with blocking writes, as the program would have: a slow reader slows the
//! program, not the host's clock. When the host's stderr fails (its reader went away), the
//! thread closes the pipe, and the program's next write fails as it would have.
//!
//! The thread starts when the program first writes: until then the watch loop (module
//! `supervise`) polls the pipe with the job's other descriptors. Most commands write nothing
//! on stderr, and a thread (its stack mapped, started, scheduled, unmapped) was a visible
//! part of a one-shot run's cost (docs/benchmarks.md). Where no thread can be started, the
//! watch loop copies what the program wrote itself, with the same blocking writes.

use super::spawn;
use std::io::{IsTerminal, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::time::Duration;

/// Set to `1` in the host's environment, the program gets the host's stderr as on a terminal:
/// no copy, and no refusal named. For `cargo xtask bench --refusals` only, which measures what
/// the copy and the naming cost on a real test suite against runs without them (the job's
/// environment is built from a safe list, so the job never sees it).
pub(crate) const NO_TEE_VAR: &str = "SANDBOX_BENCH_NO_TEE";

/// A read shorter than this, within [`COALESCE`] of the previous one, is followed by a wait
/// of [`COALESCE`].
const SHORT_READ: usize = 4096;
/// How long the copy waits after a short read that followed another closely: at most about 50
/// wakeups a second for a program that writes little and often, and the most its lines are
/// delayed on the host's stderr.
const COALESCE: Duration = Duration::from_millis(20);

/// Longest line looked at; the rest of a longer line is not.
const MAX_LINE: usize = 8 * 1024;

/// The copy of the program's stderr to the host's.
pub(crate) struct Tee {
    state: State,
}

enum State {
    /// Nothing read yet: the pipe's read end and the host's stderr, for the thread to come.
    Waiting {
        read: std::fs::File,
        host: std::fs::File,
    },
    /// A thread copies; it sends the candidate lines when the pipe ends.
    Copying(mpsc::Receiver<Vec<u8>>),
    /// No thread could be started: the watch loop copies, chunk by chunk.
    Inline {
        read: std::fs::File,
        host: std::fs::File,
        line: Vec<u8>,
        kept: Kept,
    },
    /// The pipe ended (or the host's stderr failed): the candidate lines seen.
    Ended(Vec<u8>),
}

impl Tee {
    /// The pipe the watch loop polls for the program's first write (none once a thread
    /// copies, or the pipe ended).
    pub(crate) fn watched(&self) -> Option<RawFd> {
        match &self.state {
            State::Waiting { read, .. } | State::Inline { read, .. } => Some(read.as_raw_fd()),
            State::Copying(_) | State::Ended(_) => None,
        }
    }

    /// The watched pipe is ready (`revents` from `poll`): the copy starts on a thread of its
    /// own, or (where none can be started) this chunk is copied here. A pipe that hung up
    /// with nothing in it has ended: no thread is needed at all.
    pub(crate) fn ready(&mut self, revents: libc::c_short) {
        let state = std::mem::replace(&mut self.state, State::Ended(Vec::new()));
        self.state = match state {
            State::Waiting { .. } if revents & libc::POLLIN == 0 => State::Ended(Vec::new()),
            State::Waiting { read, host } => start(read, host),
            State::Inline {
                mut read,
                mut host,
                mut line,
                mut kept,
            } => {
                let mut buf = vec![0u8; 64 * 1024];
                let more = revents & libc::POLLIN != 0
                    && match read.read(&mut buf) {
                        Ok(0) | Err(_) => false,
                        Ok(n) => {
                            collect(&buf[..n], &mut line, &mut kept);
                            host.write_all(&buf[..n]).is_ok()
                        }
                    };
                if more {
                    State::Inline {
                        read,
                        host,
                        line,
                        kept,
                    }
                } else {
                    keep(&line, &mut kept);
                    State::Ended(kept.text)
                }
            }
            other => other,
        };
    }

    /// The candidate lines seen, once the program's end of the pipe is closed (waiting at
    /// most `wait`: a process that escaped the run may hold it; its lines are then not seen).
    /// What was written after the watch loop's last look is copied now.
    pub(crate) fn finish(mut self, wait: Duration) -> String {
        let revents = match &self.state {
            State::Waiting { read, .. } | State::Inline { read, .. } => {
                Some(crate::sys::poll_one(read.as_fd(), libc::POLLIN, 0).unwrap_or(libc::POLLIN))
            }
            State::Copying(_) | State::Ended(_) => None,
        };
        match (revents, &self.state) {
            // Nothing there yet, but a writer (a process that escaped the run) may still
            // write: a thread copies it, as it would have from the start.
            (Some(0), State::Waiting { .. }) => self.ready(libc::POLLIN),
            (Some(r), _) if r != 0 => self.ready(r),
            _ => {}
        }
        // Inline: what is there now, up to the end or a look that finds nothing more (a
        // read that could block is never made here).
        while let State::Inline { read, .. } = &self.state {
            let now = crate::sys::poll_one(read.as_fd(), libc::POLLIN, 0).unwrap_or(0);
            if now == 0 {
                break;
            }
            self.ready(now);
        }
        let kept = match self.state {
            State::Copying(done) => done.recv_timeout(wait).unwrap_or_default(),
            State::Ended(kept) => kept,
            // A writer that escaped the run still holds the pipe: what was seen.
            State::Inline { line, mut kept, .. } => {
                keep(&line, &mut kept);
                kept.text
            }
            State::Waiting { .. } => Vec::new(),
        };
        String::from_utf8_lossy(&kept).into_owned()
    }
}

/// The copy started on a thread of its own, or inline where no thread can be started.
fn start(read: std::fs::File, host: std::fs::File) -> State {
    let (tx, rx) = mpsc::sync_channel(1);
    // The files go to the thread only once it runs: a failed start hands them back.
    let files = std::sync::Arc::new(std::sync::Mutex::new(Some((read, host))));
    let theirs = std::sync::Arc::clone(&files);
    let started = std::thread::Builder::new()
        .name("sandbox-tee".into())
        .spawn(move || {
            let taken = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some((read, host)) = taken {
                let _ = tx.send(copy(read, host));
            }
        });
    let back = match started {
        Ok(_) => return State::Copying(rx),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the stderr copy; the watch loop copies it");
            files.lock().unwrap_or_else(|e| e.into_inner()).take()
        }
    };
    match back {
        Some((read, host)) => State::Inline {
            read,
            host,
            line: Vec::new(),
            kept: Kept::default(),
        },
        None => State::Ended(Vec::new()),
    }
}

/// Whether two descriptors are the same open file (`2>&1`).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = |fd: BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map(std::fs::File::from)
            .and_then(|f| f.metadata())
    };
    match (meta(a), meta(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The program's descriptors 0, 1 and 2 for `sandbox run`: the host's own, duplicated above
/// them, with stderr (and stdout, when it is the same file) replaced by a pipe the returned
/// [`Tee`] copies, unless stderr is a terminal.
pub(crate) fn inherit() -> std::io::Result<([OwnedFd; 3], Option<Tee>)> {
    let stdin = spawn::dup_above(0, 3)?;
    let stdout = spawn::dup_above(1, 3)?;
    let stderr = std::io::stderr();
    if stderr.is_terminal() || std::env::var_os(NO_TEE_VAR).is_some_and(|v| v == "1") {
        return Ok(([stdin, stdout, spawn::dup_above(2, 3)?], None));
    }
    let joined = same_file(std::io::stdout().as_fd(), stderr.as_fd());
    let host = std::fs::File::from(spawn::dup_above(2, 3)?);
    let (read, write) = spawn::pipe()?;
    let write = spawn::above_stdio(write)?;
    let out = if joined { write.try_clone()? } else { stdout };
    let tee = Tee {
        state: State::Waiting {
            read: std::fs::File::from(read),
            host,
        },
    };
    Ok(([stdin, out, write], Some(tee)))
}

/// Lines kept before each candidate line: a `Caused by:` chain names its path a few lines
/// above the error (module `refusals`).
const CONTEXT: usize = 4;

/// The candidate lines seen so far, and the few lines before the next one.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) text: Vec<u8>,
    before: std::collections::VecDeque<Vec<u8>>,
}

/// Copies `from` to `to` until either ends; returns the candidate lines.
fn copy(mut from: std::fs::File, mut to: std::fs::File) -> Vec<u8> {
    let mut kept = Kept::default();
    let mut line = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // When the previous read's copy ended.
    let mut last: Option<std::time::Instant> = None;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        collect(&buf[..n], &mut line, &mut kept);
        // A program that writes a byte at a time (pytest's progress dots: one write per test)
        // would wake this thread for each: a read, a write and two context switches per byte
        // cost packaging's suite ~10% more CPU (docs/benchmarks.md). A short read that comes
        // soon after the previous one makes the thread wait a little, so that what comes next
        // is copied in one read. A program that writes a line now and then is copied at once
        // (and its last line does not delay the run's end); one that writes a lot fills the
        // buffer and is copied without waiting.
        let now = std::time::Instant::now();
        if n < SHORT_READ && last.is_some_and(|l| now.duration_since(l) < COALESCE) {
            std::thread::sleep(COALESCE);
        }
        last = Some(std::time::Instant::now());
    }
    keep(&line, &mut kept);
    kept.text
}

/// Splits `chunk` into lines (continuing `line`), keeping the candidates in `kept`. The
/// complete lines of a chunk are searched at once: when none matches (nearly always), only
/// the last few are remembered as context, and no line is looked at on its own.
pub(super) fn collect(chunk: &[u8], line: &mut Vec<u8>, kept: &mut Kept) {
    let Some(first) = memchr::memchr(b'\n', chunk) else {
        extend(line, chunk);
        return;
    };
    extend(line, &chunk[..first]);
    keep(line, kept);
    line.clear();
    let rest = &chunk[first + 1..];
    let Some(last) = memchr::memrchr(b'\n', rest) else {
        extend(line, rest);
        return;
    };
    let body = &rest[..last];
    if wanted(body) {
        for l in body.split(|b| *b == b'\n') {
            keep(&l[..l.len().min(MAX_LINE)], kept);
        }
    } else {
        let tail: Vec<&[u8]> = body.rsplit(|b| *b == b'\n').take(CONTEXT).collect();
        for l in tail.into_iter().rev() {
            remember(&l[..l.len().min(MAX_LINE)], kept);
        }
    }
    extend(line, &rest[last + 1..]);
}

fn extend(line: &mut Vec<u8>, part: &[u8]) {
    let room = MAX_LINE.saturating_sub(line.len());
    line.extend_from_slice(&part[..part.len().min(room)]);
}

/// Whether `text` holds a line the host reads after the run: a refusal's candidate (module
/// `refusals`) or a limit a program reports (module `hits`).
fn wanted(text: &[u8]) -> bool {
    super::refusals::is_candidate(text) || super::hits::names_a_limit(text)
}

/// Remembers `line` as one of the lines before the next candidate.
fn remember(line: &[u8], kept: &mut Kept) {
    let mut slot = if kept.before.len() >= CONTEXT {
        kept.before.pop_front().unwrap_or_default()
    } else {
        Vec::new()
    };
    slot.clear();
    slot.extend_from_slice(line);
    kept.before.push_back(slot);
}

/// Keeps `line` with the lines before it when it is a candidate (and there is room), else
/// remembers it as a line before the next.
fn keep(line: &[u8], kept: &mut Kept) {
    if !wanted(line) {
        remember(line, kept);
        return;
    }
    let size = line.len() + 1 + kept.before.iter().map(|l| l.len() + 1).sum::<usize>();
    if kept.text.len() + size <= super::refusals::MAX_KEPT {
        for l in kept.before.drain(..) {
            kept.text.extend_from_slice(&l);
            kept.text.push(b'\n');
        }
        kept.text.extend_from_slice(line);
        kept.text.push(b'\n');
    }
    kept.before.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tee over a fresh pipe whose host side is a file: (tee, the program's end, the file).
    fn tee_over_pipe() -> (Tee, std::fs::File, tempfile::NamedTempFile) {
        let (read, write) = spawn::pipe().unwrap();
        let host = tempfile::NamedTempFile::new().unwrap();
        let tee = Tee {
            state: State::Waiting {
                read: std::fs::File::from(read),
                host: host.reopen().unwrap(),
            },
        };
        (tee, std::fs::File::from(write), host)
    }

    fn poll(tee: &Tee) -> libc::c_short {
        let (State::Waiting { read, .. } | State::Inline { read, .. }) = &tee.state else {
            panic!("the pipe is not watched");
        };
        crate::sys::poll_one(read.as_fd(), libc::POLLIN, 1000).unwrap()
    }

    const REFUSED: &[u8] = b"touch: cannot touch '/x': Read-only file system\n";

    #[test]
    fn a_program_that_writes_nothing_gets_no_copy_thread() {
        let (mut tee, write, host) = tee_over_pipe();
        drop(write);
        let revents = poll(&tee);
        assert_eq!(revents & libc::POLLIN, 0, "a hung-up empty pipe");
        tee.ready(revents);
        assert!(
            matches!(tee.state, State::Ended(_)),
            "no thread was started"
        );
        assert_eq!(tee.watched(), None);
        assert_eq!(tee.finish(Duration::from_secs(1)), "");
        assert_eq!(std::fs::read(host.path()).unwrap(), b"");
    }

    #[test]
    fn the_first_write_starts_the_copy() {
        let (mut tee, mut write, host) = tee_over_pipe();
        write.write_all(b"progress\n").unwrap();
        tee.ready(poll(&tee));
        assert!(matches!(tee.state, State::Copying(_)));
        assert_eq!(tee.watched(), None, "the thread reads the pipe now");
        write.write_all(REFUSED).unwrap();
        drop(write);
        let kept = tee.finish(Duration::from_secs(5));
        assert!(kept.ends_with("Read-only file system\n"), "{kept:?}");
        let copied = std::fs::read(host.path()).unwrap();
        assert_eq!(copied, [&b"progress\n"[..], REFUSED].concat());
    }

    #[test]
    fn what_the_loop_did_not_see_is_copied_at_the_end() {
        // The program wrote and exited between the loop's last poll and its end.
        let (tee, mut write, host) = tee_over_pipe();
        write.write_all(REFUSED).unwrap();
        drop(write);
        let kept = tee.finish(Duration::from_secs(5));
        assert_eq!(kept.as_bytes(), REFUSED);
        assert_eq!(std::fs::read(host.path()).unwrap(), REFUSED);
    }

    #[test]
    fn without_a_thread_the_loop_copies_each_chunk() {
        let (tee, mut write, host) = tee_over_pipe();
        let State::Waiting { read, host: to } = tee.state else {
            unreachable!()
        };
        let mut tee = Tee {
            state: State::Inline {
                read,
                host: to,
                line: Vec::new(),
                kept: Kept::default(),
            },
        };
        write.write_all(b"first\n").unwrap();
        tee.ready(poll(&tee));
        assert!(matches!(tee.state, State::Inline { .. }), "still open");
        assert_eq!(std::fs::read(host.path()).unwrap(), b"first\n");
        write.write_all(REFUSED).unwrap();
        // Still open when the job ends (an escaped writer): what is there is copied, and
        // nothing blocks.
        let kept = tee.finish(Duration::from_secs(1));
        let all = [&b"first\n"[..], REFUSED].concat();
        assert_eq!(kept.as_bytes(), all, "the candidate and the line before it");
        assert_eq!(std::fs::read(host.path()).unwrap(), all);
        drop(write);
    }

    #[test]
    fn only_candidate_lines_are_kept_across_chunks() {
        let mut line = Vec::new();
        let mut kept = Kept::default();
        collect(
            b"1\n2\n3\n4\nall well\ntouch: '/x': Read-on",
            &mut line,
            &mut kept,
        );
        collect(b"ly file system\nmore\n", &mut line, &mut kept);
        keep(&line, &mut kept);
        assert_eq!(
            kept.text,
            b"2\n3\n4\nall well\ntouch: '/x': Read-only file system\n"
        );
    }

    #[test]
    fn lines_are_the_same_in_any_chunking() {
        let text: &[u8] = b"a\nb\nc: Permission denied '/p'\nd\ne\nf\ng\nh\ni\nEROFS '/q'\n\nj\nk";
        let mut whole = Kept::default();
        for l in text.split(|b| *b == b'\n') {
            keep(l, &mut whole);
        }
        assert_eq!(
            whole.text,
            b"a\nb\nc: Permission denied '/p'\nf\ng\nh\ni\nEROFS '/q'\n"
        );
        for size in 1..text.len() {
            let mut line = Vec::new();
            let mut kept = Kept::default();
            for c in text.chunks(size) {
                collect(c, &mut line, &mut kept);
            }
            keep(&line, &mut kept);
            assert_eq!(kept.text, whole.text, "chunks of {size}");
        }
    }
}
