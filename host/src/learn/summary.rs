//! What `sandbox learn` says on stderr: a progress line while a run takes longer than a
//! second (only when stderr is a terminal: agents and logs get no carriage-return noise), and
//! a table of the calls by group with those the base profile refuses.

use crate::exec::record::{Progress, Recording};
use crate::policy::NATIVE;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The groups a call is counted in, in this order (the first that lists it); the others
/// (`loader`, `read-only`, `hardening`, `spawn`) overlap these.
const GROUPS: &[&str] = &[
    "base", "fd-io", "fs-read", "fs-write", "threads", "network", "process", "exec", "never",
];

/// New calls named per group before the table says "+N".
const NAMES_SHOWN: usize = 6;

/// The group a call belongs to (`other` when none lists it by name).
fn group_of(name: &str) -> &'static str {
    for g in GROUPS {
        let Some(group) = crate::policy::groups::find(g) else {
            continue;
        };
        let listed = group.entries.iter().any(|e| {
            let bare = e.split(['(', '=']).next().unwrap_or(e).trim();
            bare == name
        });
        if listed {
            return g;
        }
    }
    "other"
}

/// The table: one row per group with calls (distinct, calls made, new versus `base`), then
/// the totals and the paths written.
pub fn summary(rec: &Recording, base: &str) -> String {
    struct Row {
        distinct: usize,
        calls: u64,
        new: Vec<&'static str>,
    }
    let mut rows: Vec<(&str, Row)> = GROUPS
        .iter()
        .chain(std::iter::once(&"other"))
        .map(|g| {
            (
                *g,
                Row {
                    distinct: 0,
                    calls: 0,
                    new: Vec::new(),
                },
            )
        })
        .collect();
    for (nr, call) in &rec.calls {
        let name = NATIVE.syscall_name(*nr).unwrap_or("(unnamed)");
        let g = group_of(name);
        let row = &mut rows
            .iter_mut()
            .find(|(n, _)| *n == g)
            .expect("every group")
            .1;
        row.distinct += 1;
        row.calls += call.count;
        if call.new {
            row.new.push(name);
        }
    }
    let header = format!("new versus {base}");
    let mut out = format!(
        "  {:<9} {:>8} {:>9}  {header}\n",
        "group", "distinct", "calls"
    );
    for (g, row) in rows.iter().filter(|(_, r)| r.distinct > 0) {
        let new = if row.new.is_empty() {
            "-".to_string()
        } else {
            let mut shown: Vec<&str> = row.new.iter().take(NAMES_SHOWN).copied().collect();
            let more = row.new.len().saturating_sub(NAMES_SHOWN);
            let more = (more > 0).then(|| format!("+{more}"));
            shown.extend(more.as_deref());
            format!("{}: {}", row.new.len(), shown.join(" "))
        };
        out += &format!("  {:<9} {:>8} {:>9}  {new}\n", g, row.distinct, row.calls);
    }
    let new_total: usize = rows.iter().map(|(_, r)| r.new.len()).sum();
    out += &format!(
        "  {:<9} {:>8} {:>9}  {new_total}\n",
        "total",
        rec.calls.len(),
        rec.total
    );
    out += &format!(
        "  processes: {}; paths written: {}\n",
        rec.processes,
        rec.written.len()
    );
    out
}

/// A progress line on stderr, rewritten in place every half second from the first second on,
/// and erased when dropped.
pub struct ProgressLine {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressLine {
    /// Starts showing `progress` (call only when stderr is a terminal).
    pub fn start(progress: Arc<Progress>) -> ProgressLine {
        let (tx, rx) = mpsc::channel::<()>();
        let start = Instant::now();
        let thread = std::thread::Builder::new()
            .name("sandbox-learn-progress".into())
            .spawn(move || {
                let mut shown = false;
                let mut wait = Duration::from_secs(1);
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(wait) {
                    wait = Duration::from_millis(500);
                    shown = true;
                    let _ = write!(
                        std::io::stderr(),
                        "\r\x1b[Ksandbox learn: {:.0} s, {} calls, {} distinct, {} processes",
                        start.elapsed().as_secs_f64(),
                        progress.calls.load(Ordering::Relaxed),
                        progress.distinct.load(Ordering::Relaxed),
                        progress.processes.load(Ordering::Relaxed),
                    );
                }
                if shown {
                    let _ = write!(std::io::stderr(), "\r\x1b[K");
                }
            })
            .ok();
        ProgressLine {
            stop: Some(tx),
            thread,
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fall_into_their_groups() {
        assert_eq!(group_of("read"), "fd-io");
        assert_eq!(group_of("mmap"), "base");
        assert_eq!(group_of("socket"), "network");
        assert_eq!(group_of("execve"), "exec");
    }
}
