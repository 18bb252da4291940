//! Runtime settings of the runner that are not part of a request: the grace after a timeout,
//! how processes are held together, the preload to use, which thread starts filtered
//! programs, and cancellation.

use super::contain::Containment;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Runtime settings that are not part of a request.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Time between SIGTERM and SIGKILL after a timeout.
    pub grace: Duration,
    /// How the request's processes are held together.
    pub containment: Containment,
    /// Use this preload instead of the embedded one.
    pub libsandbox_path: Option<PathBuf>,
    /// Which thread filtered programs are started from (see `docs/exec.md`).
    pub start: StartFrom,
    /// Ends the request early when cancelled from another thread (a server shutting down):
    /// its whole process tree is killed and the result says `cancelled`.
    pub cancel: Option<Cancel>,
}

/// Which thread a filtered program is started from ([`RunOptions::start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// Cloned from the profile's spawner thread, which holds the filter already (x86_64,
    /// where it is the default; elsewhere it means [`StartFrom::CallingThread`]).
    SpawnerThread,
    /// Started from the calling thread; the child attaches the filter itself before exec.
    CallingThread,
}

/// A cancellation handle for one or more running requests; clones share the state.
///
/// Backed by an eventfd, so a request's poll loop wakes the moment it is cancelled.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<OwnedFd>);

impl Cancel {
    /// A handle that is not cancelled yet.
    pub fn new() -> std::io::Result<Cancel> {
        let fd = crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)?;
        Ok(Cancel(Arc::new(fd)))
    }

    /// Cancels every request running with this handle (and any started with it later).
    pub fn cancel(&self) {
        // The counter stays non-zero because nobody reads it.
        crate::sys::eventfd_add_one(self.0.as_raw_fd());
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        crate::sys::poll_one(self.0.as_fd(), libc::POLLIN, 0).is_ok_and(|r| r != 0)
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            grace: Duration::from_secs(1),
            containment: Containment::Auto,
            libsandbox_path: None,
            start: if cfg!(target_arch = "x86_64") {
                StartFrom::SpawnerThread
            } else {
                StartFrom::CallingThread
            },
            cancel: None,
        }
    }
}
