//! The tier a run got: one word for the layers that held together, so that a user can reason
//! about a run without reading each layer's status. The tiers nest; each names what held:
//!
//! - `isolated`: namespaces (own PID space and `/proc`, private `/tmp`, read-only repository
//!   hooks), Landlock and the seccomp filter (and cgroups where the host has them);
//! - `contained`: Landlock and the seccomp filter, no namespaces (inside a container that
//!   refuses them);
//! - `filtered`: the seccomp filter alone (no Landlock on this kernel, or `landlock off`);
//! - `unconfined`: no filter at all (the `unrestricted` profile, or a program allowed to run
//!   unconfined), whatever else held. Not one of the three tiers: it says that none applied.
//!
//! A run with namespaces but without Landlock is `filtered`: the tiers are nested, and files
//! are what the namespaces alone protect least (see docs/security.md).

use crate::sandbox::Sandboxed;
use serde::Serialize;

/// Which layers held for one run, from the strongest tier down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Namespaces, Landlock and the seccomp filter.
    Isolated,
    /// Landlock and the seccomp filter, no namespaces.
    Contained,
    /// The seccomp filter alone.
    Filtered,
    /// No seccomp filter.
    Unconfined,
}

impl Tier {
    /// The tier of a run whose filter was `filter`, with Landlock enforcing something
    /// (`landlock`) and namespaces (`namespaces`).
    pub fn of(filter: Sandboxed, landlock: bool, namespaces: bool) -> Tier {
        match (filter, landlock, namespaces) {
            (Sandboxed::None, _, _) => Tier::Unconfined,
            (_, true, true) => Tier::Isolated,
            (_, true, false) => Tier::Contained,
            (_, false, _) => Tier::Filtered,
        }
    }

    /// Its name, as results carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Isolated => "isolated",
            Tier::Contained => "contained",
            Tier::Filtered => "filtered",
            Tier::Unconfined => "unconfined",
        }
    }

    /// What the tier is made of, in words.
    pub fn layers(self) -> &'static str {
        match self {
            Tier::Isolated => "namespaces, Landlock and seccomp",
            Tier::Contained => "Landlock and seccomp, no namespaces",
            Tier::Filtered => "seccomp alone",
            Tier::Unconfined => "no filter",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tier_is_the_strongest_whose_layers_all_held() {
        assert_eq!(Tier::of(Sandboxed::Exact, true, true), Tier::Isolated);
        assert_eq!(Tier::of(Sandboxed::OuterOnly, true, false), Tier::Contained);
        assert_eq!(Tier::of(Sandboxed::Exact, false, true), Tier::Filtered);
        assert_eq!(Tier::of(Sandboxed::Exact, false, false), Tier::Filtered);
        assert_eq!(Tier::of(Sandboxed::None, true, true), Tier::Unconfined);
        assert_eq!(
            serde_json::to_string(&Tier::Contained).unwrap(),
            "\"contained\""
        );
    }
}
