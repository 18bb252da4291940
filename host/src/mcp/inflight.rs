//! The calls in progress, by request id, so that `notifications/cancelled` can stop one.
//!
//! A cancelled call's work is stopped (a running command is killed) and its answer is not
//! sent, as the specification asks of a receiver that honours the cancellation. A call learns
//! what stopping it means only once it has started something, so it registers that then
//! ([`Call::on_cancel`]); a cancellation that came first runs it at once.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Most calls in progress at once: the reader waits for one to end before starting more
/// (each is a thread and often a sandboxed job).
pub const MAX_IN_FLIGHT: usize = 16;

/// How to stop a call's work.
type Stop = Box<dyn FnOnce() + Send>;

/// One call in progress.
#[derive(Default)]
pub struct Call {
    cancelled: AtomicBool,
    stop: Mutex<Option<Stop>>,
}

impl Call {
    /// Whether the client cancelled the call (its answer is then not sent).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Sets what stops the call's work; run at once when the call was cancelled already.
    pub fn on_cancel(&self, stop: impl FnOnce() + Send + 'static) {
        let mut slot = self.stop.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            drop(slot);
            stop();
        } else {
            *slot = Some(Box::new(stop));
        }
    }

    /// The work has ended: a later cancellation has nothing to stop.
    pub fn done(&self) {
        self.stop.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn cancel(&self) {
        let stop = {
            let mut slot = self.stop.lock().unwrap_or_else(|e| e.into_inner());
            self.cancelled.store(true, Ordering::Release);
            slot.take()
        };
        if let Some(stop) = stop {
            stop();
        }
    }
}

/// The calls in progress.
#[derive(Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, Arc<Call>>>,
    ended: Condvar,
}

/// A request id as a key: `1` and `"1"` are different ids.
fn key(id: &Value) -> String {
    id.to_string()
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Call>>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a call, waiting while [`MAX_IN_FLIGHT`] are in progress; `None` when a call
    /// with this id is in progress (ids must be unique among the requests in progress).
    pub fn begin(&self, id: &Value) -> Option<Arc<Call>> {
        let mut calls = self.lock();
        if calls.contains_key(&key(id)) {
            return None;
        }
        while calls.len() >= MAX_IN_FLIGHT {
            calls = self.ended.wait(calls).unwrap_or_else(|e| e.into_inner());
        }
        let call = Arc::new(Call::default());
        calls.insert(key(id), Arc::clone(&call));
        Some(call)
    }

    /// The call has been answered (or dropped, cancelled).
    pub fn end(&self, id: &Value) {
        self.lock().remove(&key(id));
        self.ended.notify_all();
    }

    /// `notifications/cancelled`: stops call `id` if it is in progress (an unknown or
    /// finished id is ignored, as the specification says).
    pub fn cancel(&self, id: &Value) {
        let call = self.lock().get(&key(id)).cloned();
        if let Some(c) = call {
            c.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_cancellation_stops_the_work_once_whenever_it_comes() {
        let f = InFlight::default();
        let stopped = Arc::new(AtomicUsize::new(0));
        let count = |s: &Arc<AtomicUsize>| {
            let s = Arc::clone(s);
            move || {
                s.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Registered before the cancellation.
        let a = f.begin(&json!(1)).unwrap();
        assert!(f.begin(&json!(1)).is_none(), "an id in progress is refused");
        assert!(f.begin(&json!("1")).is_some(), "\"1\" is another id than 1");
        a.on_cancel(count(&stopped));
        f.cancel(&json!(1));
        f.cancel(&json!(1));
        assert!(a.is_cancelled());
        assert_eq!(stopped.load(Ordering::SeqCst), 1);
        // Registered after it: run at once.
        let b = f.begin(&json!(2)).unwrap();
        f.cancel(&json!(2));
        b.on_cancel(count(&stopped));
        assert_eq!(stopped.load(Ordering::SeqCst), 2);
        // Done before it: nothing to stop.
        let c = f.begin(&json!(3)).unwrap();
        c.on_cancel(count(&stopped));
        c.done();
        f.cancel(&json!(3));
        assert_eq!(stopped.load(Ordering::SeqCst), 2);
        f.end(&json!(1));
        assert!(f.begin(&json!(1)).is_some());
    }
}
