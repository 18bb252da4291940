//! What the gRPC service and the server share: the checked options, the engine's settings,
//! the runs in progress (cancelled together at shutdown), the processes of `Start` and their
//! session.

#![allow(clippy::result_large_err)]

use super::args::ProcessApiConfig;
use super::table;
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
        let resident = std::env::current_exe()
            .map_err(|e| Status::internal(format!("cannot find the sandbox executable: {e}")))?;
        let mut policy = self.config.policy.clone();
        // A command's default limit: `Start`'s processes live until ended (the call's own
        // deadline, when it has one, is set per command), within the engine's longest.
        policy.timeout_s = crate::exec::MAX_TIMEOUT_S;
        let options = crate::session::SessionOptions::new(resident);
        let session =
            tokio::task::spawn_blocking(move || crate::session::Session::start(&policy, &options))
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
