//! The session's one filter listener, where the resident has a spawner thread: the thread
//! installed the session's filter on itself once, every filtered command inherits it, and the
//! host serves its listener for the whole session, telling each refused call's command apart.
//!
//! A command's first process leads a process group of its own (`setpgid`, or `setsid`, which
//! makes a group too, module `child`), so every process it starts that does not make or join
//! another group has the command's pid as its process group id. On a notification (never
//! otherwise) the host reads the calling thread's group from `/proc/TID/stat`; a running
//! command with that pid gets the call. Else the thread's parents are walked up to a running
//! command (a process that made a group or session of its own inside a command).
//!
//! The kernel lets a process join another group of the same session (`setpgid(0, PGID)`): a
//! process of a command started alone, which is in the resident's session, could join the
//! group of another such command, and would have its refused calls counted in that command's
//! result. It gains nothing by it: every command of a session is confined by the same rules,
//! and a process can already signal any other of its session (docs/sessions.md, "Groups and
//! sessions").
//!
//! A process whose chain leads to a child of the resident that is not registered yet (a
//! command between its clone and the host's `started`) waits for it, at most
//! [`REGISTERING`] (a command's first process leads a process group or session of its own
//! before its program runs; a child of the resident that leads none is an adopted background
//! process). Anything else (a background process whose command has ended) belongs to no
//! running command: its calls are refused by the session's rules and counted for the session
//! ([`Routes::unowned`]), named when the session ends (a `tracing` warning), not in any
//! command's result.

use crate::exec::notify::Slot;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a call of a command that the host has not registered yet waits for it.
const REGISTERING: Duration = Duration::from_secs(2);

/// Which command a session's process belongs to.
pub(crate) struct Routes {
    /// Running commands by the pid of their first process (as the host sees it).
    commands: Mutex<HashMap<i32, Arc<Slot>>>,
    /// The processes no running command owns.
    unowned: Arc<Slot>,
    /// The resident's pid as the host sees it (the parent of every command).
    resident: i32,
}

impl Routes {
    /// Routes for a session whose resident has pid `resident`; calls no command owns are
    /// answered by `unowned`'s rules.
    pub(crate) fn new(resident: i32, unowned: Arc<Slot>) -> Routes {
        Routes {
            commands: Mutex::new(HashMap::new()),
            unowned,
            resident,
        }
    }

    /// A command has started: its calls go to `slot`.
    pub(crate) fn add(&self, pid: i32, slot: Arc<Slot>) {
        self.lock().insert(pid, slot);
    }

    /// A command's result is made: its background processes' calls go to the session.
    pub(crate) fn remove(&self, pid: i32) {
        self.lock().remove(&pid);
    }

    /// What was refused to processes no running command owned.
    pub(crate) fn unowned(&self) -> &Slot {
        &self.unowned
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Arc<Slot>>> {
        self.commands.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot of thread `tid`, whose call waits.
    pub(crate) fn route(&self, tid: i32) -> Arc<Slot> {
        let deadline = Instant::now() + REGISTERING;
        loop {
            match self.find(tid) {
                Found::Command(slot) => return slot,
                Found::Nobody => return Arc::clone(&self.unowned),
                Found::Registering if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Found::Registering => return Arc::clone(&self.unowned),
            }
        }
    }

    fn find(&self, tid: i32) -> Found {
        let Some((_, group)) = stat(tid) else {
            return Found::Nobody;
        };
        if let Some(s) = self.lock().get(&group) {
            return Found::Command(Arc::clone(s));
        }
        // A process that made a group or session of its own: its chain of parents.
        let mut p = tid;
        for _ in 0..64 {
            if let Some(s) = self.lock().get(&p) {
                return Found::Command(Arc::clone(s));
            }
            match stat(p) {
                // A command's first process leads a group (or session) of its own from
                // before its program runs: a child of the resident that leads none is a
                // background process of an ended command, adopted by the resident.
                Some((parent, group)) if parent == self.resident => {
                    return if group == p {
                        Found::Registering
                    } else {
                        Found::Nobody
                    };
                }
                Some((parent, _)) if parent > 1 => p = parent,
                _ => return Found::Nobody,
            }
        }
        Found::Nobody
    }
}

enum Found {
    Command(Arc<Slot>),
    /// A child of the resident the host has not registered yet.
    Registering,
    Nobody,
}

/// The parent and process group of `pid`, from `/proc/PID/stat` (after the command name,
/// which may hold anything up to its last `)`: state, ppid, pgrp, session).
fn stat(pid: i32) -> Option<(i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 2..].split(' ');
    let parent = fields.nth(1)?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some((parent, group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_found_by_its_group_or_its_parents_else_it_is_nobodys() {
        // This test process: its group and parent are whatever the runner gave it.
        let me = std::process::id() as i32;
        let (parent, group) = stat(me).unwrap();
        let unowned = Slot::routed(crate::exec::notify::Response::Errno(1), None, None);
        let routes = Routes::new(-1, Arc::clone(&unowned));
        assert!(Arc::ptr_eq(&routes.route(me), &unowned));
        let by_group = Slot::routed(crate::exec::notify::Response::Errno(1), None, None);
        routes.add(group, Arc::clone(&by_group));
        assert!(Arc::ptr_eq(&routes.route(me), &by_group));
        routes.remove(group);
        let by_parent = Slot::routed(crate::exec::notify::Response::Errno(1), None, None);
        routes.add(parent, Arc::clone(&by_parent));
        if parent != group {
            assert!(Arc::ptr_eq(&routes.route(me), &by_parent));
        }
        // A name with spaces and parentheses does not shift the fields.
        assert!(stat(i32::MAX).is_none());
    }
}
