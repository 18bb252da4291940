//! The record of every destination a sandboxed program tried to reach through the proxy:
//! host, port, allowed or refused and why, how many times. One entry per (host, port,
//! decision), in the order first seen, so a loop of a thousand requests is one line.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Distinct destinations kept; later new ones are only counted (`Records::dropped`).
pub const MAX_DESTINATIONS: usize = 1000;

/// One destination and what the proxy did with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Destination {
    /// The host as the client named it (lower case), or the address for a host port.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// Whether the proxy let the connection through.
    pub allowed: bool,
    /// Why it was refused (refused destinations only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For allowed destinations: the last error reaching it, if any attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many connections or requests tried it.
    pub attempts: u64,
}

/// A thread-safe, bounded record.
#[derive(Debug, Default)]
pub struct Records {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    list: Vec<Destination>,
    index: HashMap<(String, u16, bool), usize>,
    dropped: u64,
}

impl Records {
    /// Notes an allowed attempt (with the error if reaching it failed).
    pub fn allowed(&self, host: &str, port: u16, error: Option<String>) {
        self.note(host, port, true, None, error);
    }

    /// Notes a refused attempt and its reason.
    pub fn refused(&self, host: &str, port: u16, reason: String) {
        self.note(host, port, false, Some(reason), None);
    }

    fn note(
        &self,
        host: &str,
        port: u16,
        allowed: bool,
        reason: Option<String>,
        error: Option<String>,
    ) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = (host.to_string(), port, allowed);
        if let Some(&i) = g.index.get(&key) {
            let d = &mut g.list[i];
            d.attempts += 1;
            if reason.is_some() {
                d.reason = reason;
            }
            if error.is_some() {
                d.error = error;
            }
            return;
        }
        if g.list.len() >= MAX_DESTINATIONS {
            g.dropped += 1;
            return;
        }
        let i = g.list.len();
        g.list.push(Destination {
            host: key.0.clone(),
            port,
            allowed,
            reason,
            error,
            attempts: 1,
        });
        g.index.insert(key, i);
    }

    /// The destinations so far, in the order first seen.
    pub fn snapshot(&self) -> Vec<Destination> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .list
            .clone()
    }

    /// Attempts at new destinations not kept because the record was full.
    pub fn dropped(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_attempts_count_once() {
        let r = Records::default();
        r.allowed("a.com", 443, None);
        r.refused("b.com", 80, "not allowed".into());
        r.allowed("a.com", 443, Some("connection refused".into()));
        r.refused("b.com", 80, "not allowed".into());
        let s = r.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].attempts, s[0].allowed), (2, true));
        assert_eq!(s[0].error.as_deref(), Some("connection refused"));
        assert_eq!((s[1].host.as_str(), s[1].attempts), ("b.com", 2));
        for i in 0..MAX_DESTINATIONS + 5 {
            r.refused(&format!("h{i}.com"), 80, "x".into());
        }
        assert_eq!(r.snapshot().len(), MAX_DESTINATIONS);
        assert_eq!(r.dropped(), 7);
    }
}
