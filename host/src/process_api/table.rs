//! The processes `Start` began, under the ids the API hands out (`InitEvent.process_id`).
//!
//! Ids are the server's own counter, not pids: a pid is reused by the system once the process
//! is reaped, an id here never is within one server, so a late `SendSignal` for an ended
//! process gets NOT_FOUND instead of reaching a stranger.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tonic::Status;

/// Most processes started with `Start` and still running, at once.
pub const MAX_PROCESSES: usize = 256;
/// Largest terminal accepted, in either direction (a `u16` in the kernel's `winsize`).
pub const MAX_WINDOW: u32 = 4096;

/// What the unary calls can do to a running process.
pub trait Running: Send + Sync {
    /// Writes bytes to its stdin.
    fn write_stdin(&self, data: &[u8]) -> Result<(), Status>;
    /// Closes its stdin (EOF).
    fn close_stdin(&self) -> Result<(), Status>;
    /// Sends a signal to its process group.
    fn signal(&self, sig: i32) -> Result<(), Status>;
    /// Sets its terminal's size.
    fn resize(&self, cols: u16, rows: u16) -> Result<(), Status>;
}

/// The running processes by id.
#[derive(Default)]
pub struct Table {
    next: AtomicI32,
    live: Mutex<HashMap<i32, Arc<dyn Running>>>,
}

impl Table {
    /// The process of `id`, or NOT_FOUND naming the id.
    pub fn get(&self, id: i32) -> Result<Arc<dyn Running>, Status> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                Status::not_found(format!(
                    "process_id {id}: no running process of that id (it has ended, or was \
                     never started by this server)"
                ))
            })
    }

    /// Adds a process; RESOURCE_EXHAUSTED when [`MAX_PROCESSES`] are running.
    pub fn insert(&self, process: Arc<dyn Running>) -> Result<i32, Status> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= MAX_PROCESSES {
            return Err(Status::resource_exhausted(format!(
                "{MAX_PROCESSES} processes are running already; end one first"
            )));
        }
        let id = self.next.fetch_add(1, SeqCst) + 1;
        live.insert(id, process);
        Ok(id)
    }

    /// Forgets a process that has ended.
    pub fn remove(&self, id: i32) {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

/// Checks a terminal size of `ResizeTTY` or `Start`'s `pty`.
pub fn window(cols: u32, rows: u32) -> Result<(u16, u16), Status> {
    if cols == 0 || rows == 0 || cols > MAX_WINDOW || rows > MAX_WINDOW {
        return Err(Status::invalid_argument(format!(
            "cols {cols}, rows {rows}: each from 1 to {MAX_WINDOW}"
        )));
    }
    Ok((cols as u16, rows as u16))
}
