//! What the one-shot engine tells a session about the sandbox it built for the session's
//! resident process: the layers that held, once that process runs. The session's thread sets
//! a sender before it hands its job to the engine, which blocks in the job's wait loop for
//! the session's whole life; the engine sends on it right after the spawn.

use std::cell::RefCell;
use std::sync::mpsc::Sender;

/// The session's layers, as the engine planned and started them.
#[derive(Debug)]
pub(crate) struct Started {
    /// What Landlock enforces (`None`: off).
    pub landlock: Option<crate::landlock::Status>,
    /// What the namespace layer did (`None`: off or unavailable).
    pub isolation: Option<super::isolation::Status>,
    /// Why there are no namespaces, when they were wanted but are unavailable.
    pub namespaces_unavailable: Option<String>,
    /// The network mode carried out.
    pub network: crate::network::Mode,
    /// Where the session's memory and process limits are held (its cgroups), for the
    /// commands' own cgroups below them (module `session::cgroups`).
    pub cgroups: Vec<super::cgroup_nest::LimitDir>,
    /// In the contained tier, where the session's commands' listeners reach the host: the
    /// calls their filter sends to the host and the places the host makes them within.
    pub emulation: Option<Emulation>,
    /// The plan's warnings (broad workspace, root below the isolated tier, ...).
    pub warnings: Vec<String>,
    /// Who of the session made each proxied connection, where the session has a proxy or
    /// host ports: each command's result lists its own destinations.
    pub owners: Option<std::sync::Arc<super::net_owners::Owners>>,
    /// The proxy's address inside (`proxy` mode).
    pub proxy: Option<String>,
}

/// The contained tier's supervision of a session's commands (module `emulate`): the claims
/// their filter carries and the session's writable places, unix sockets and ports.
#[derive(Debug)]
pub(crate) struct Emulation {
    /// The claimed calls.
    pub claims: super::emulate::Claims,
    /// Where the host makes them.
    pub places: super::emulate::Places,
}

thread_local! {
    static SENDER: RefCell<Option<Sender<Started>>> = const { RefCell::new(None) };
}

/// Sets where this thread's next session job reports its start.
pub(crate) fn expect(tx: Sender<Started>) {
    SENDER.with(|s| *s.borrow_mut() = Some(tx));
}

/// Called by the engine once a session's resident process runs.
pub(crate) fn started(info: Started) {
    if let Some(tx) = SENDER.with(|s| s.borrow_mut().take()) {
        let _ = tx.send(info);
    }
}
