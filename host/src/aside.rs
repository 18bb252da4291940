//! Names for files written aside and then moved or linked into place (a placeholder, a
//! restored git file, a file put through the process API): unique to the call, not only to
//! the process, since one server runs many jobs at once and a name shared by its threads made
//! their exclusive creations fail each other.

use std::sync::atomic::{AtomicU64, Ordering};

/// `.NAME.sandbox-TAG-PID-N`, hidden beside `NAME`; `N` counts this process's calls.
pub(crate) fn name(name: &str, tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        ".{name}.sandbox-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_calls_never_share_a_name() {
        let (a, b) = (
            super::name("commondir", "made"),
            super::name("commondir", "made"),
        );
        assert_ne!(a, b);
        assert!(a.starts_with(".commondir.sandbox-made-"), "{a}");
    }
}
