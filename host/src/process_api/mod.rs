//! `sandbox serve --process-api`: the Kubernetes agent-sandbox `sandboxd` interface, so that a
//! warm pod confines every command it is asked to run without a pod per command.
//!
//! Two listeners, as sandboxd has: gRPC `process.v1.ProcessService` (module `grpc`, the
//! interface in `proto/process/v1/process.proto`) and REST `/v1/files/{path}`, `/v1/health`,
//! `/v1/metadata` (module `rest`). Every command runs under the policy fixed when the server
//! starts (module `args`) through the one spawn engine. Built only with the `process-api`
//! cargo feature: tonic, tokio and hyper are not in the default binary. See
//! `docs/process-api.md`.

// tonic's `Status` (and axum's `Response`) are the error types of every handler: boxing them
// in the helpers would only be undone at the handlers' return.
#![allow(clippy::result_large_err)]

pub mod args;
#[cfg(feature = "process-api")]
mod beneath;
#[cfg(feature = "process-api")]
mod execute;
#[cfg(feature = "process-api")]
mod grpc;
#[cfg(feature = "process-api")]
mod rest;
#[cfg(feature = "process-api")]
mod table;

/// The code generated from `proto/process/v1/process.proto` (`host/proto_build.rs`).
#[cfg(feature = "process-api")]
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("process.v1");
}

pub use args::{ProcessApiArgs, ProcessApiConfig};

/// Whether this build has the process API (the `process-api` cargo feature).
pub const AVAILABLE: bool = cfg!(feature = "process-api");

#[cfg(feature = "process-api")]
pub use server::serve;

#[cfg(feature = "process-api")]
mod server {
    use super::{grpc, rest, table, ProcessApiConfig};
    use crate::exec::{Cancel, RunOptions};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    use tonic::Status;

    /// What the gRPC and REST sides share.
    pub struct Shared {
        /// The checked options.
        pub config: ProcessApiConfig,
        /// The engine's settings (each call's `cancel` is its own).
        pub run: RunOptions,
        /// Commands that may run at once (`--max-concurrent`).
        pub slots: tokio::sync::Semaphore,
        /// The runs in progress, cancelled together at shutdown.
        pub running: Runs,
        /// The processes of `Start`.
        pub table: table::Table,
        /// The session `Start`'s processes run in: started by the first, again after it ended.
        pub session: tokio::sync::Mutex<Option<Arc<crate::session::Session>>>,
    }

    impl Shared {
        /// The session of `Start`'s processes, started if there is none (or it has ended).
        pub async fn session(&self) -> Result<Arc<crate::session::Session>, Status> {
            let mut slot = self.session.lock().await;
            if let Some(s) = slot.as_ref().filter(|s| !s.is_ended()) {
                return Ok(Arc::clone(s));
            }
            if self.running.stopping.load(SeqCst) {
                return Err(Status::unavailable("the server is shutting down"));
            }
            let resident = std::env::current_exe().map_err(|e| {
                Status::internal(format!("cannot find the sandbox executable: {e}"))
            })?;
            let policy = self.config.policy.clone();
            let options = crate::session::SessionOptions::new(resident);
            let session = tokio::task::spawn_blocking(move || {
                crate::session::Session::start(&policy, &options)
            })
            .await
            .map_err(|e| Status::internal(format!("starting the session failed: {e}")))?
            .map_err(|e| super::execute::status(&e))?;
            let session = Arc::new(session);
            *slot = Some(Arc::clone(&session));
            Ok(session)
        }
    }

    /// The cancellation handles of the runs in progress.
    #[derive(Default)]
    pub struct Runs {
        next: AtomicU64,
        live: Mutex<HashMap<u64, Cancel>>,
        stopping: std::sync::atomic::AtomicBool,
    }

    /// One run's registration: its handle is cancelled when this is dropped before the run
    /// ended (the caller went away), and at shutdown.
    pub struct RunGuard<'a> {
        runs: &'a Runs,
        id: u64,
        /// The run's cancellation handle.
        pub cancel: Cancel,
    }

    impl Runs {
        /// Registers a run; UNAVAILABLE once the server is stopping.
        pub fn register(&self) -> Result<RunGuard<'_>, Status> {
            let cancel = Cancel::new()
                .map_err(|e| Status::internal(format!("cannot make a cancel handle: {e}")))?;
            let id = self.next.fetch_add(1, SeqCst);
            let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            if self.stopping.load(SeqCst) {
                return Err(Status::unavailable("the server is shutting down"));
            }
            live.insert(id, cancel.clone());
            Ok(RunGuard {
                runs: self,
                id,
                cancel,
            })
        }

        /// Cancels every run, and every run registered from now on.
        pub fn cancel_all(&self) {
            let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            self.stopping.store(true, SeqCst);
            for c in live.values() {
                c.cancel();
            }
        }
    }

    impl Drop for RunGuard<'_> {
        fn drop(&mut self) {
            // Cancelling a run that has ended does nothing; one still running is killed.
            self.cancel.cancel();
            self.runs
                .live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.id);
        }
    }

    /// Why the server did not start.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum ProcessApiError {
        /// A listener could not be bound.
        #[error("{flag} {addr}: {source}")]
        Listen {
            /// The flag of the address.
            flag: &'static str,
            /// The address.
            addr: std::net::SocketAddr,
            /// What bind said.
            source: std::io::Error,
        },
        /// The workspace, the runtime or a signal handler could not be set up.
        #[error("cannot start the process API: {0}")]
        Setup(String),
    }

    /// Serves both listeners until SIGTERM or SIGINT; then cancels the running commands (their
    /// process trees are killed) and returns once both listeners have stopped.
    pub fn serve(
        config: ProcessApiConfig,
        run: RunOptions,
        max_concurrent: usize,
    ) -> Result<(), ProcessApiError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sandbox-api")
            .enable_all()
            .build()
            .map_err(|e| ProcessApiError::Setup(format!("the async runtime: {e}")))?;
        runtime.block_on(run_servers(config, run, max_concurrent))
    }

    async fn run_servers(
        config: ProcessApiConfig,
        run: RunOptions,
        max_concurrent: usize,
    ) -> Result<(), ProcessApiError> {
        let root = super::beneath::open_root(&config.workspace).map_err(|e| {
            ProcessApiError::Setup(format!("the workspace {}: {e}", config.workspace.display()))
        })?;
        let rest_listener = tokio::net::TcpListener::bind(config.rest)
            .await
            .map_err(|source| ProcessApiError::Listen {
                flag: "--rest-listen",
                addr: config.rest,
                source,
            })?;
        let grpc_listener = tokio::net::TcpListener::bind(config.grpc)
            .await
            .map_err(|source| ProcessApiError::Listen {
                flag: "--grpc-listen",
                addr: config.grpc,
                source,
            })?;
        let rest_state = Arc::new(rest::Rest {
            root,
            started: std::time::Instant::now(),
            metadata: rest::metadata_env(&config.metadata_prefix),
        });
        let shared = Arc::new(Shared {
            config,
            run,
            slots: tokio::sync::Semaphore::new(max_concurrent),
            running: Runs::default(),
            table: table::Table::default(),
            session: tokio::sync::Mutex::new(None),
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| ProcessApiError::Setup(format!("a SIGTERM handler: {e}")))?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let rest =
            axum::serve(rest_listener, rest::router(rest_state)).with_graceful_shutdown(stopped());
        let grpc = tonic::transport::Server::builder()
            .add_service(
                super::pb::process_service_server::ProcessServiceServer::new(grpc::Service {
                    shared: Arc::clone(&shared),
                }),
            )
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(grpc_listener),
                stopped(),
            );
        let waiter = {
            let shared = Arc::clone(&shared);
            async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                shared.running.cancel_all();
                shared.slots.close();
                // Every process of `Start` ends with the session; their streams then end.
                if let Some(session) = shared.session.lock().await.take() {
                    let _ = tokio::task::spawn_blocking(move || session.end()).await;
                }
                let _ = stop_tx.send(true);
            }
        };
        let (rest, grpc, ()) = tokio::join!(rest, grpc, waiter);
        rest.map_err(|e| ProcessApiError::Setup(format!("the REST listener: {e}")))?;
        grpc.map_err(|e| ProcessApiError::Setup(format!("the gRPC listener: {e}")))?;
        Ok(())
    }
}

#[cfg(feature = "process-api")]
pub use server::{ProcessApiError, Shared};
