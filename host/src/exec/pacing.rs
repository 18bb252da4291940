//! Pacing the host's answers to a request's calls: every answer the supervisor gives (a
//! refused call's errno, a call it makes for the job) costs the host a receive, the work and a
//! reply outside the job's limits. Past [`FREE_CALLS`] of a kind a request gets at most
//! [`PACED_RATE`] answers a second: a program that loops on such a call waits longer in it,
//! and the host spends at most a few percent of one CPU on it.

use std::time::{Duration, Instant};

/// Calls of one kind a request gets answered at once.
pub(crate) const FREE_CALLS: u64 = 10_000;

/// Answers a second past [`FREE_CALLS`].
pub(crate) const PACED_RATE: u64 = 10_000;

/// How many answers of one kind a request had, and since when they are paced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pacer {
    /// Answers counted.
    pub total: u64,
    /// When the request went past [`FREE_CALLS`].
    pub paced_since: Option<Instant>,
}

impl Pacer {
    /// Counts one answer and says how long to hold it: past [`FREE_CALLS`], so that the
    /// request gets at most [`PACED_RATE`] a second; never more than 10 ms at once, so a
    /// burst after a quiet spell is not saved up.
    pub(crate) fn count(&mut self, now: Instant) -> Option<Duration> {
        self.total = self.total.saturating_add(1);
        self.hold(now)
    }

    /// How long to hold the answer just counted.
    pub(crate) fn hold(&mut self, now: Instant) -> Option<Duration> {
        if self.total <= FREE_CALLS {
            return None;
        }
        let since = *self.paced_since.get_or_insert(now);
        let owed = self.total - FREE_CALLS;
        let due = since + Duration::from_micros(owed.saturating_mul(1_000_000) / PACED_RATE);
        due.checked_duration_since(now)
            .map(|d| d.min(Duration::from_millis(10)))
    }
}
