//! The gRPC `process.v1.ProcessService` (`proto/process/v1/process.proto`).
//!
//! `Execute` runs one command to its end through the one-shot engine
//! ([`crate::exec::exec_with`]) on a blocking thread; the other calls act on the processes
//! `Start` began (module `start`), kept in [`super::table::Table`] under the ids the API hands out.

use super::execute;
use super::pb::{self, process_service_server::ProcessService};
use super::start::StartStream;
use super::state::Shared;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service; one per server.
pub struct Service {
    /// What the service and the REST side share.
    pub shared: Arc<Shared>,
}

#[tonic::async_trait]
impl ProcessService for Service {
    type StartStream = StartStream;

    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        // The call's deadline, when the client set one, is the process's wall-clock limit.
        let timeout = super::start::deadline(request.metadata())?;
        let req = request.into_inner();
        let exec = execute::request(
            &self.shared.config.policy,
            &self.shared.config.workspace,
            req.config.as_ref(),
        )?;
        let env = req
            .config
            .as_ref()
            .map(|c| c.env_vars.clone().into_iter().collect())
            .unwrap_or_default();
        super::start::start(&self.shared, exec, env, req.pty, timeout)
            .await
            .map(Response::new)
    }

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteResponse>, Status> {
        let req = request.into_inner();
        let exec = execute::request(
            &self.shared.config.policy,
            &self.shared.config.workspace,
            req.config.as_ref(),
        )?;
        let _permit = self
            .shared
            .slots
            .acquire()
            .await
            .map_err(|_| Status::unavailable("the server is shutting down"))?;
        // Cancelled when this future is dropped (the client went away) or the server stops.
        let running = self.shared.running.register()?;
        let mut opts = self.shared.run.clone();
        opts.cancel = Some(running.cancel.clone());
        let result = tokio::task::spawn_blocking(move || crate::exec::exec_with(&exec, &opts))
            .await
            .map_err(|e| Status::internal(format!("the run failed: {e}")))?
            .map_err(|e| execute::status(&e))?;
        drop(running);
        let mut stderr = result.stderr.clone().into_bytes();
        for line in execute::report_lines(&result) {
            stderr.extend_from_slice(line.as_bytes());
            stderr.push(b'\n');
        }
        let mut response = Response::new(pb::ExecuteResponse {
            exit_code: execute::exit_code(&result),
            stdout: result.stdout.clone().into_bytes(),
            stderr,
        });
        response.metadata_mut().insert_bin(
            "x-sandbox-result-bin",
            tonic::metadata::MetadataValue::from_bytes(&execute::result_json(&result)),
        );
        Ok(response)
    }

    async fn write_stdin(
        &self,
        request: Request<pb::WriteStdinRequest>,
    ) -> Result<Response<pb::WriteStdinResponse>, Status> {
        let req = request.into_inner();
        let Some(payload) = req.payload else {
            return Err(Status::invalid_argument(
                "payload: missing; give input (bytes) or eof",
            ));
        };
        let process = self.shared.table.get(req.process_id)?;
        match payload {
            pb::write_stdin_request::Payload::Input(bytes) => {
                tokio::task::spawn_blocking(move || process.write_stdin(&bytes))
                    .await
                    .map_err(|e| Status::internal(format!("writing stdin failed: {e}")))??
            }
            pb::write_stdin_request::Payload::Eof(()) => process.close_stdin()?,
        }
        Ok(Response::new(pb::WriteStdinResponse {}))
    }

    async fn send_signal(
        &self,
        request: Request<pb::SendSignalRequest>,
    ) -> Result<Response<pb::SendSignalResponse>, Status> {
        let req = request.into_inner();
        let signal = match pb::Signal::try_from(req.signal) {
            Ok(pb::Signal::Sigint) => libc::SIGINT,
            Ok(pb::Signal::Sigkill) => libc::SIGKILL,
            Ok(pb::Signal::Sigterm) => libc::SIGTERM,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "signal: {} is not one of SIGNAL_SIGINT (2), SIGNAL_SIGKILL (9), \
                     SIGNAL_SIGTERM (15)",
                    req.signal
                )))
            }
        };
        let process = self.shared.table.get(req.process_id)?;
        process.signal(signal)?;
        Ok(Response::new(pb::SendSignalResponse {}))
    }

    async fn resize_tty(
        &self,
        request: Request<pb::ResizeTtyRequest>,
    ) -> Result<Response<pb::ResizeTtyResponse>, Status> {
        let req = request.into_inner();
        let (cols, rows) = super::table::window(req.cols, req.rows)?;
        let process = self.shared.table.get(req.process_id)?;
        process.resize(cols, rows)?;
        Ok(Response::new(pb::ResizeTtyResponse {}))
    }
}
