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
//!
//! The decision is a pure function ([`choose`], then [`carry`]) of facts the planner gathers
//! once ([`Layers`], [`Routes`]): which tier, which calls its filter sends to the supervisor,
//! which filter carries them, and what is left unguarded. Nothing here makes a descriptor or
//! asks the kernel, so every container shape the docs name is a row of a table test.

use super::emulate::ClaimSet;
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

/// The layers planned for one job, as the tier decision reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layers {
    /// The filter the job runs under ([`Sandboxed::None`]: unconfined).
    pub(crate) filter: Sandboxed,
    /// The job gets namespaces of its own (the isolation layer was planned).
    pub(crate) namespaces: bool,
    /// Landlock enforces something for the job.
    pub(crate) landlock: bool,
    /// Landlock keeps the job's unix sockets to its places itself (ABI 9), and no socket is
    /// allowed by name (its rules would grant those nothing).
    pub(crate) landlock_unix: bool,
}

/// How a filter that claims calls could reach a supervisor for this job on this machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Routes {
    /// A seccomp listener can be had here (not inside another sandbox that holds it).
    pub(crate) listener: bool,
    /// The supervisor may take the job's descriptors (`pidfd_getfd`; Docker's default profile
    /// allows it only with `CAP_SYS_PTRACE`).
    pub(crate) descriptors: bool,
    /// The profile's spawner thread starts the job: the filter it installs carries the claims.
    pub(crate) spawner: bool,
    /// A filter attached in the child would notify the host and has room for the claims.
    pub(crate) attached: bool,
    /// The job is a session's resident, whose commands' filter would notify the host and has
    /// room for the claims.
    pub(crate) session: bool,
}

/// The filter that carries a job's claims to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Carrier {
    /// None: the claimed calls run unsupervised (or nothing is claimed).
    None,
    /// The profile's spawner thread's filter (its shared listener).
    Spawner,
    /// The filter the child attaches (its own listener).
    Attached,
    /// The filter a session's commands install (the session answers them).
    Session,
}

/// What the tier's claims leave unguarded, for the run's warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gap {
    /// Nothing.
    None,
    /// A contained job whose claims reach no supervisor: metadata calls and host unix
    /// sockets. `listener` says whether a listener existed (else: inside another sandbox).
    Unguarded { listener: bool },
    /// A contained job whose supervisor may not take its descriptors: other terminals, file
    /// flags and host unix sockets.
    Undelegable,
    /// An isolated job whose supervisor may not take its descriptors: host unix sockets bound
    /// after its view was made.
    LateSockets,
}

/// The tier a job is planned for and the calls its filter sends to the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Choice {
    /// The tier, as the result will name it when every planned layer holds.
    pub(crate) tier: Tier,
    /// The calls the filter claims.
    pub(crate) claims: ClaimSet,
}

/// How the claims of a [`Choice`] reach the host, and what they leave unguarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Carried {
    /// The filter that carries them.
    pub(crate) carrier: Carrier,
    /// What the run's warning names as unguarded.
    pub(crate) gap: Gap,
}

impl Carried {
    /// The claims reach a supervisor (the host makes the claimed calls within the job's places).
    pub(crate) fn supervised(self) -> bool {
        self.carrier != Carrier::None
    }
}

/// The tier of a job with `layers`, and the calls its filter claims: every claim in the
/// contained tier (Landlock without namespaces: the metadata calls, connects and sends, the
/// opens that may write); in the isolated tier the file claims, and the connects and sends
/// unless Landlock keeps unix sockets itself; none below.
pub(crate) fn choose(layers: Layers) -> Choice {
    let claims = match (layers.namespaces, layers.landlock) {
        (false, true) => ClaimSet::Contained,
        (true, _) if !layers.landlock_unix => ClaimSet::Isolated,
        (true, _) => ClaimSet::IsolatedFiles,
        (false, false) => ClaimSet::None,
    };
    Choice {
        tier: Tier::of(layers.filter, layers.landlock, layers.namespaces),
        claims,
    }
}

/// Which filter carries `choice`'s claims given `routes` (the spawner's first, then one
/// attached in the child, then a session's), and what the run is left without.
pub(crate) fn carry(choice: Choice, routes: Routes) -> Carried {
    let carrier = match choice.claims {
        ClaimSet::None => Carrier::None,
        _ if routes.spawner => Carrier::Spawner,
        _ if routes.attached => Carrier::Attached,
        _ if routes.session && routes.listener => Carrier::Session,
        _ => Carrier::None,
    };
    let gap = match (choice.claims, carrier) {
        (ClaimSet::Contained, Carrier::None) => Gap::Unguarded {
            listener: routes.listener,
        },
        (ClaimSet::Contained, _) if !routes.descriptors => Gap::Undelegable,
        (ClaimSet::Isolated, Carrier::Spawner | Carrier::Attached | Carrier::Session)
            if !routes.descriptors =>
        {
            Gap::LateSockets
        }
        _ => Gap::None,
    };
    Carried { carrier, gap }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layers: filter exact, namespaces, Landlock, Landlock keeps unix sockets.
    fn layers(namespaces: bool, landlock: bool, landlock_unix: bool) -> Layers {
        Layers {
            filter: Sandboxed::Exact,
            namespaces,
            landlock,
            landlock_unix,
        }
    }

    /// Routes: listener, descriptors, spawner, attached, session.
    fn routes(flags: [bool; 5]) -> Routes {
        let [listener, descriptors, spawner, attached, session] = flags;
        Routes {
            listener,
            descriptors,
            spawner,
            attached,
            session,
        }
    }

    /// Every shape the docs name (docs/isolation.md, docs/containers.md), as the planner sees
    /// it, with the tier, claims, carrier and gap it gets.
    #[test]
    fn every_shape_the_docs_name_gets_its_tier_claims_carrier_and_gap() {
        use Carrier as C;
        use ClaimSet as S;
        let t = true;
        let f = false;
        let rows: &[(&str, Layers, Routes, Tier, ClaimSet, Carrier, Gap)] = &[
            (
                "isolated: this VM, a built-in profile",
                layers(t, t, f),
                routes([t, t, t, f, f]),
                Tier::Isolated,
                S::Isolated,
                C::Spawner,
                Gap::None,
            ),
            (
                "isolated where Landlock keeps unix sockets (ABI 9)",
                layers(t, t, t),
                routes([t, t, t, f, f]),
                Tier::Isolated,
                S::IsolatedFiles,
                C::Spawner,
                Gap::None,
            ),
            (
                "isolated where pidfd_getfd is refused",
                layers(t, t, f),
                routes([t, f, t, f, f]),
                Tier::Isolated,
                S::Isolated,
                C::Spawner,
                Gap::LateSockets,
            ),
            (
                "isolated, ABI 9, pidfd_getfd refused: Landlock keeps late sockets",
                layers(t, t, t),
                routes([t, f, t, f, f]),
                Tier::Isolated,
                S::IsolatedFiles,
                C::Spawner,
                Gap::None,
            ),
            (
                "isolated, a request that changed its profile",
                layers(t, t, f),
                routes([t, t, f, t, f]),
                Tier::Isolated,
                S::Isolated,
                C::Attached,
                Gap::None,
            ),
            (
                "contained: Docker's default profile (no CAP_SYS_PTRACE)",
                layers(f, t, f),
                routes([t, f, t, f, f]),
                Tier::Contained,
                S::Contained,
                C::Spawner,
                Gap::Undelegable,
            ),
            (
                "contained: no seccomp profile, or CAP_SYS_PTRACE",
                layers(f, t, f),
                routes([t, t, t, f, f]),
                Tier::Contained,
                S::Contained,
                C::Spawner,
                Gap::None,
            ),
            (
                "contained, a request that changed its profile",
                layers(f, t, f),
                routes([t, t, f, t, f]),
                Tier::Contained,
                S::Contained,
                C::Attached,
                Gap::None,
            ),
            (
                "contained, a filter that cannot carry the claims",
                layers(f, t, f),
                routes([t, t, f, f, f]),
                Tier::Contained,
                S::Contained,
                C::None,
                Gap::Unguarded { listener: true },
            ),
            (
                "contained inside another sandbox (no listener)",
                layers(f, t, f),
                routes([f, f, f, f, f]),
                Tier::Contained,
                S::Contained,
                C::None,
                Gap::Unguarded { listener: false },
            ),
            (
                "a contained session",
                layers(f, t, f),
                routes([t, t, f, f, t]),
                Tier::Contained,
                S::Contained,
                C::Session,
                Gap::None,
            ),
            (
                "a contained session under Docker's default profile",
                layers(f, t, f),
                routes([t, f, f, f, t]),
                Tier::Contained,
                S::Contained,
                C::Session,
                Gap::Undelegable,
            ),
            (
                "a contained session without a listener",
                layers(f, t, f),
                routes([f, f, f, f, t]),
                Tier::Contained,
                S::Contained,
                C::None,
                Gap::Unguarded { listener: false },
            ),
            (
                "an isolated session",
                layers(t, t, f),
                routes([t, t, f, f, t]),
                Tier::Isolated,
                S::Isolated,
                C::Session,
                Gap::None,
            ),
            (
                "filtered: namespaces without Landlock (its view still claims sockets)",
                layers(t, f, f),
                routes([t, t, t, f, f]),
                Tier::Filtered,
                S::Isolated,
                C::Spawner,
                Gap::None,
            ),
            (
                "filtered: no namespaces, no Landlock (gVisor-like)",
                layers(f, f, f),
                routes([f, f, f, f, f]),
                Tier::Filtered,
                S::None,
                C::None,
                Gap::None,
            ),
            (
                "filtered on a machine with every route",
                layers(f, f, f),
                routes([t, t, t, t, t]),
                Tier::Filtered,
                S::None,
                C::None,
                Gap::None,
            ),
        ];
        for &(shape, l, r, tier, claims, carrier, gap) in rows {
            let choice = choose(l);
            assert_eq!((choice.tier, choice.claims), (tier, claims), "{shape}");
            assert_eq!(carry(choice, r), Carried { carrier, gap }, "{shape}");
        }
    }

    #[test]
    fn the_spawner_carries_first_then_an_attached_filter_then_a_session() {
        let choice = choose(layers(false, true, false));
        let carrier = |r| carry(choice, routes(r)).carrier;
        assert_eq!(carrier([true, true, true, true, true]), Carrier::Spawner);
        assert_eq!(carrier([true, true, false, true, true]), Carrier::Attached);
        assert_eq!(carrier([true, true, false, false, true]), Carrier::Session);
        assert_eq!(carrier([true, true, false, false, false]), Carrier::None);
        // An unconfined job gets the tier's name from its filter alone; claims follow the
        // layers, and carry nothing without a profile's routes.
        let unconfined = choose(Layers {
            filter: Sandboxed::None,
            ..layers(true, true, false)
        });
        assert_eq!(unconfined.tier, Tier::Unconfined);
        assert_eq!(
            carry(unconfined, Routes::default()),
            Carried {
                carrier: Carrier::None,
                gap: Gap::None
            }
        );
    }

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
