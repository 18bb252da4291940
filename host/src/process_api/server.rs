//! The two listeners and their shutdown.

use super::args::ProcessApiConfig;
use super::state::{Runs, Shared};
use super::{grpc, rest, table};
use crate::exec::RunOptions;
use std::sync::Arc;

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
