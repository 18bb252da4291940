//! `Start`: a command of the server's session, relayed as the call's stream of events until
//! it ends; its handle in the table serves `WriteStdin`, `SendSignal` and `ResizeTTY`.

#![allow(clippy::result_large_err)]

use super::pb;
use super::state::Shared;
use super::table::{window, Running};
use crate::exec::Request;
use crate::session::{Command, Event, Process};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::Stream;
use tonic::Status;

/// The stream of one `Start` call.
pub type StartStream = Pin<Box<dyn Stream<Item = Result<pb::StartResponse, Status>> + Send>>;

/// A process of `Start`: a command of the server's session.
struct Started {
    process: Arc<Process>,
}

impl Running for Started {
    fn write_stdin(&self, data: &[u8]) -> Result<(), Status> {
        self.process.write_stdin(data).map_err(|e| {
            Status::failed_precondition(format!(
                "input: the process's stdin does not take it ({e}); it has closed its stdin or \
                 was sent eof"
            ))
        })
    }

    fn close_stdin(&self) -> Result<(), Status> {
        self.process.close_stdin();
        Ok(())
    }

    fn signal(&self, sig: i32) -> Result<(), Status> {
        self.process
            .signal(sig)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ESRCH) => Status::not_found(format!("the process has ended: {e}")),
                Some(libc::EPERM) => Status::permission_denied(format!("signal refused: {e}")),
                _ => Status::internal(format!("cannot deliver the signal: {e}")),
            })
    }

    fn resize(&self, cols: u16, rows: u16) -> Result<(), Status> {
        if !self.process.has_tty() {
            return Err(Status::failed_precondition(
                "the process has no terminal: start it with `pty` to resize it",
            ));
        }
        self.process
            .resize(cols, rows)
            .map_err(|e| Status::internal(format!("cannot resize the terminal: {e}")))
    }
}

/// Output events buffered per `Start` stream before the command's output waits for the
/// client (the pipe then fills and the command blocks, as under a slow terminal).
const EVENTS_BUFFERED: usize = 64;

/// The call's gRPC deadline (`grpc-timeout`: up to 8 digits and a unit, `H`, `M`, `S`, `m`,
/// `u` or `n`), as a duration; `None` when the client set none. A deadline past the engine's
/// longest timeout (a day) is that.
pub fn deadline(metadata: &tonic::metadata::MetadataMap) -> Result<Option<Duration>, Status> {
    let Some(v) = metadata.get("grpc-timeout") else {
        return Ok(None);
    };
    let bad = || {
        Status::invalid_argument(
            "grpc-timeout: not a gRPC timeout (1 to 8 digits and a unit: H, M, S, m, u, n)",
        )
    };
    let v = v.to_str().map_err(|_| bad())?;
    let (digits, unit) = v.split_at(v.len().saturating_sub(1));
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let t = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(bad()),
    };
    Ok(Some(
        t.min(Duration::from_secs_f64(crate::exec::MAX_TIMEOUT_S)),
    ))
}

/// Starts `request` for `Start` in the server's session: the stream carries `InitEvent`, the
/// output as it comes, the sandbox's report (as `sandbox run` says it, on stderr) and
/// `ExitEvent`. A client that goes away has its process killed. `timeout`: the call's
/// deadline; without one the process lives until it exits, is signalled or killed, or the
/// session ends (at most a day, the engine's longest timeout).
pub async fn start(
    shared: &Arc<Shared>,
    request: Request,
    env: Vec<(String, String)>,
    pty: Option<pb::Pty>,
    timeout: Option<Duration>,
) -> Result<StartStream, Status> {
    let window = pty.map(|p| window(p.cols, p.rows)).transpose()?;
    let session = shared.session().await?;
    let mut command = Command::new(request.argv.clone()).stream(true);
    if let Some(t) = timeout {
        command = command.timeout(t);
    }
    if let Some((cols, rows)) = window {
        command = command.pty(cols, rows);
    }
    for (k, v) in env {
        command = command.env(k, v);
    }
    if let Some(cwd) = &request.cwd {
        command = command.cwd(cwd.clone());
    }
    let process = tokio::task::spawn_blocking(move || session.spawn(&command))
        .await
        .map_err(|e| Status::internal(format!("starting the process failed: {e}")))?
        .map_err(|e| super::execute::status(&e))?;
    let process = Arc::new(process);
    // For naming the refusals the command's stderr reports, once it has ended.
    let named = request
        .validate()
        .ok()
        .and_then(|v| Some((crate::exec::sandbox_for(&v, &shared.run).ok()?, v)));
    let id = shared.table.insert(Arc::new(Started {
        process: Arc::clone(&process),
    }))?;
    let (tx, rx) = tokio::sync::mpsc::channel(EVENTS_BUFFERED);
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("sandbox-api-start".into())
        .spawn(move || relay(&shared, id, process, named, &tx))
        .map_err(|e| Status::internal(format!("cannot start a relay thread: {e}")))?;
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

type Tx = tokio::sync::mpsc::Sender<Result<pb::StartResponse, Status>>;

fn event(e: pb::start_response::Event) -> Result<pb::StartResponse, Status> {
    Ok(pb::StartResponse { event: Some(e) })
}

/// Sends the process's events until it ends; kills it when the client has gone away.
fn relay(
    shared: &Shared,
    id: i32,
    process: Arc<Process>,
    named: Option<(Arc<crate::sandbox::Sandbox>, crate::exec::Validated)>,
    tx: &Tx,
) {
    use pb::start_response::Event as E;
    let mut gone = tx
        .blocking_send(event(E::Init(pb::InitEvent { process_id: id })))
        .is_err();
    for ev in process.events() {
        if gone {
            continue;
        }
        let e = match ev {
            Event::Stdout(b) => E::Stdout(b),
            Event::Stderr(b) => E::Stderr(b),
        };
        if tx.blocking_send(event(e)).is_err() {
            // Nobody reads the output any more: nobody can stop the process either.
            gone = true;
            let _ = process.signal(libc::SIGKILL);
        }
    }
    // The events end when the process has ended: no call can reach it any more.
    shared.table.remove(id);
    let mut process = process;
    let process = loop {
        // Calls that took the process from the table a moment ago hold it briefly.
        match Arc::try_unwrap(process) {
            Ok(p) => break p,
            Err(p) => {
                process = p;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    };
    let mut result = process.wait();
    if let Some((sandbox, v)) = &named {
        crate::exec::name_refusals(&mut result, v, sandbox, &Default::default());
    }
    if gone {
        return;
    }
    let report: String = super::execute::report_lines(&result)
        .into_iter()
        .map(|l| l + "\n")
        .collect();
    if !report.is_empty() {
        let _ = tx.blocking_send(event(E::Stderr(report.into_bytes())));
    }
    let _ = tx.blocking_send(event(E::Exit(pb::ExitEvent {
        exit_code: super::execute::exit_code(&result),
    })));
}

#[cfg(test)]
mod tests {
    use super::deadline;
    use std::time::Duration;

    #[test]
    fn a_grpc_deadline_reads_as_gprc_says() {
        let of = |v: &str| {
            let mut m = tonic::metadata::MetadataMap::new();
            m.insert("grpc-timeout", v.parse().unwrap());
            deadline(&m)
        };
        assert_eq!(of("2S").unwrap(), Some(Duration::from_secs(2)));
        assert_eq!(of("1999m").unwrap(), Some(Duration::from_millis(1999)));
        assert_eq!(of("5M").unwrap(), Some(Duration::from_secs(300)));
        assert_eq!(of("99999999H").unwrap(), Some(Duration::from_secs(86_400)));
        for bad in ["", "S", "123456789S", "1x", "-1S", "1.5S", "S1"] {
            assert!(of(bad).is_err(), "{bad}");
        }
        assert_eq!(
            deadline(&tonic::metadata::MetadataMap::new()).unwrap(),
            None
        );
    }
}
