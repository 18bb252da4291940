//! The outer filter: installed by the host in the child between fork and exec, so that every
//! program is confined, including those the preload cannot enter (static, musl, a failed
//! preload). It is the profile's own policy with exemptions, decided before any of its rules,
//! for exactly what the first `execve`, the dynamic loader, libc start-up and the preload's own
//! installation need (the `@loader` group). The kernel runs every filter a process has and the
//! strictest answer wins.
//!
//! An exemption is added only where the profile does not already allow what the loader does
//! (its calls' real arguments, [`LOADER_CALLS`]). For the built-in profiles none is needed, so
//! the outer filter *is* the profile (plus the one `execve`) and the preload stacks nothing: it
//! only arms its SIGSYS handler when violations must be named. A profile that lacks loader
//! calls gets exemptions, and then the preload stacks the exact profile on top once start-up is
//! done. Skipping an exemption can only make the outer filter stricter: a program whose loader
//! makes a call the profile refuses fails to start, it never runs with less confinement.
//!
//! The first `execve` is exempted only for the address of the path string the host passes
//! (`execve(a0.64 == ADDRESS)`): the new program has its own address space and cannot know that
//! address, so it cannot exec again where the profile forbids exec (a wrong guess meets the
//! profile's action).

use sandbox_policy::profile::Profile;
use sandbox_policy::{bpf, grammar, Action, Error, ErrorKind, Insn, Policy, Source, NATIVE};

/// The arguments with which glibc's loader and the preload make the `@loader` calls that have
/// argument rules (others are checked with zero arguments).
pub const LOADER_CALLS: &[(&str, [u64; 6])] = &[
    // ld.so opens libraries with O_RDONLY|O_CLOEXEC.
    ("openat", [0xFFFF_FF9C, 0, 0o2000000, 0, 0, 0]),
    ("open", [0, 0o2000000, 0, 0, 0, 0]),
    // PR_SET_NO_NEW_PRIVS, 1.
    ("prctl", [38, 1, 0, 0, 0, 0]),
    // SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC.
    ("seccomp", [1, 1, 0, 0, 0, 0]),
];

/// The outer policy of a profile before the per-command `execve` exemption.
#[derive(Clone, Debug)]
pub struct OuterBase {
    /// The profile's policy plus the exemptions it needs.
    pub policy: Box<Policy>,
    /// No exemption was needed: the outer filter enforces the profile exactly (but for the
    /// host's own first `execve`).
    pub exact: bool,
}

/// The outer policy of a profile (`None` when the profile installs no filter).
pub fn base_policy(profile: &Profile, action: Option<Action>) -> Result<Option<OuterBase>, Error> {
    let Some(mut policy) = profile.policy(NATIVE, action)? else {
        return Ok(None);
    };
    let reference = policy.clone();
    let loader = sandbox_policy::groups::find("loader").expect("profiles/groups.toml has @loader");
    let mut exact = true;
    for entry in loader.entries {
        let name = entry.split(['(', '=']).next().unwrap_or(entry);
        // A call this architecture lacks (open on aarch64) needs no exemption.
        let Some(nr) = NATIVE.syscall_number(name) else {
            continue;
        };
        let args = LOADER_CALLS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or([0; 6], |(_, a)| *a);
        if reference.decide(nr, &args) != Action::Allow {
            exact = false;
            grammar::parse_exemptions(&mut policy, Source::Allow, entry)?;
        }
    }
    Ok(Some(OuterBase { policy, exact }))
}

/// Compiles the outer filter for one command whose program path string lives at `path_addr`.
pub fn program(base: &Policy, path_addr: u64) -> Result<Vec<Insn>, Error> {
    let mut policy = Box::new(base.clone());
    let rule = format!("execve(a0.64 == {path_addr:#x})");
    grammar::parse_exemptions(&mut policy, Source::Allow, &rule)?;
    bpf::compile_vec(&policy).map_err(|k: ErrorKind| Error::whole(Source::Allow, k))
}

/// The outer filter of one profile, compiled at most once. Per command only the two 32-bit
/// halves of the `execve` address differ (the compiler emits `ld hi; jeq HI; ld lo; jeq LO`
/// whatever the value), so they are patched into a copy instead of compiling again: compiling
/// costs tens of microseconds per spawn, patching nothing measurable. Nothing is compiled
/// until a command needs the program: the exec runtime's spawner threads compile their own,
/// so a one-shot run that uses one never pays for this one.
#[derive(Clone, Debug)]
pub struct Template {
    base: Box<Policy>,
    /// The program compiled for a sentinel address and the indexes of the instructions holding
    /// its high and low halves; `None` if they could not be located (then every command is
    /// compiled in full).
    compiled: std::sync::OnceLock<Option<(Vec<Insn>, usize, usize)>>,
}

impl Template {
    /// A template for `base`; the program is compiled on first use.
    pub fn new(base: Box<Policy>) -> Result<Template, Error> {
        Ok(Template {
            base,
            compiled: std::sync::OnceLock::new(),
        })
    }

    /// Compiles the policy for two sentinel addresses and locates the address's instructions:
    /// the two programs must differ in exactly those two constants.
    fn locate(base: &Policy) -> Option<(Vec<Insn>, usize, usize)> {
        const A: u64 = 0x0000_7a5c_1d3e_9f01;
        const B: u64 = 0x0000_25a3_e2c1_60f7;
        let (pa, pb) = (program(base, A).ok()?, program(base, B).ok()?);
        let halves = |x: u64| ((x >> 32) as u32, x as u32);
        let ((ahi, alo), (bhi, blo)) = (halves(A), halves(B));
        let mut hi = None;
        let mut lo = None;
        let mut located = pa.len() == pb.len();
        for (i, (a, b)) in pa.iter().zip(&pb).enumerate().filter(|(_, (a, b))| a != b) {
            let same_but_k = Insn { k: b.k, ..*a } == *b;
            match (a.k, b.k) {
                (x, y) if same_but_k && (x, y) == (ahi, bhi) && hi.is_none() => hi = Some(i),
                (x, y) if same_but_k && (x, y) == (alo, blo) && lo.is_none() => lo = Some(i),
                _ => located = false,
            }
        }
        match (located, hi, lo) {
            (true, Some(h), Some(l)) => Some((pa, h, l)),
            _ => None,
        }
    }

    fn compiled(&self) -> Option<&(Vec<Insn>, usize, usize)> {
        self.compiled
            .get_or_init(|| Self::locate(&self.base))
            .as_ref()
    }

    /// The policy the template compiles (before the `execve` exemption).
    pub fn policy(&self) -> &Policy {
        &self.base
    }

    /// The outer filter for one command whose program path string lives at `path_addr`:
    /// the same instructions [`program`] compiles.
    pub fn program(&self, path_addr: u64) -> Result<Vec<Insn>, Error> {
        match self.compiled() {
            Some((prog, h, l)) => {
                let mut p = prog.clone();
                p[*h].k = (path_addr >> 32) as u32;
                p[*l].k = path_addr as u32;
                Ok(p)
            }
            None => program(&self.base, path_addr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_patches_exactly_what_a_fresh_compile_gives() {
        for name in Profile::builtin_names() {
            let profile = Profile::builtin(name).unwrap();
            for action in [None, Some(Action::Trap), Some(Action::Errno(1))] {
                let Some(base) = base_policy(&profile, action).unwrap() else {
                    continue;
                };
                assert!(
                    base.exact,
                    "{name}: a built-in profile needs no loader exemption"
                );
                let base = base.policy;
                let t = Template::new(base.clone()).unwrap();
                assert!(t.compiled().is_some(), "{name}: the address was located");
                for addr in [
                    0,
                    1,
                    0x4a_5000,
                    0x5555_5555_8000,
                    0x7fff_ffff_f000,
                    0xffff_ffff,
                    1 << 32,
                    u64::MAX,
                ] {
                    assert_eq!(
                        t.program(addr).unwrap(),
                        program(&base, addr).unwrap(),
                        "{name} {addr:#x}"
                    );
                }
            }
        }
    }
}
