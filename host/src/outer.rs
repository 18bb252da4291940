//! The outer filter: installed by the host in the child between fork and exec, so that every
//! program is confined, including those the preload cannot enter (static, musl, a failed
//! preload). It is the profile's own policy with exemptions, decided before any of its rules,
//! for exactly what the first `execve`, the dynamic loader, libc start-up and the preload's own
//! installation need (the `@loader` group). The preload then stacks the exact profile on top;
//! the kernel runs both and the strictest answer wins.
//!
//! The first `execve` is exempted only for the address of the path string the host passes
//! (`execve(a0.64 == ADDRESS)`): the new program has its own address space and cannot know that
//! address, so it cannot exec again where the profile forbids exec (a wrong guess meets the
//! profile's action).

use sandbox_policy::profile::Profile;
use sandbox_policy::{bpf, grammar, Action, Error, ErrorKind, Insn, Policy, Source, NATIVE};

/// The outer policy of a profile before the per-command `execve` exemption (`None` when the
/// profile installs no filter).
pub fn base_policy(
    profile: &Profile,
    action: Option<Action>,
) -> Result<Option<Box<Policy>>, Error> {
    let Some(mut policy) = profile.policy(NATIVE, action)? else {
        return Ok(None);
    };
    grammar::parse_exemptions(&mut policy, Source::Allow, "@loader")?;
    Ok(Some(policy))
}

/// Compiles the outer filter for one command whose program path string lives at `path_addr`.
pub fn program(base: &Policy, path_addr: u64) -> Result<Vec<Insn>, Error> {
    let mut policy = Box::new(base.clone());
    let rule = format!("execve(a0.64 == {path_addr:#x})");
    grammar::parse_exemptions(&mut policy, Source::Allow, &rule)?;
    bpf::compile_vec(&policy).map_err(|k: ErrorKind| Error::whole(Source::Allow, k))
}

/// The outer filter of one profile, compiled once. Per command only the two 32-bit halves of
/// the `execve` address differ (the compiler emits `ld hi; jeq HI; ld lo; jeq LO` whatever the
/// value), so they are patched into a copy instead of compiling again: compiling costs tens of
/// microseconds per spawn, patching nothing measurable.
#[derive(Clone, Debug)]
pub struct Template {
    base: Box<Policy>,
    /// The program compiled for a sentinel address and the indexes of the instructions holding
    /// its high and low halves; `None` if they could not be located (then every command is
    /// compiled in full).
    compiled: Option<(Vec<Insn>, usize, usize)>,
}

impl Template {
    /// Compiles `base` for two sentinel addresses and locates the address's instructions: the
    /// two programs must differ in exactly those two constants.
    pub fn new(base: Box<Policy>) -> Result<Template, Error> {
        const A: u64 = 0x0000_7a5c_1d3e_9f01;
        const B: u64 = 0x0000_25a3_e2c1_60f7;
        let (pa, pb) = (program(&base, A)?, program(&base, B)?);
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
        let compiled = match (located, hi, lo) {
            (true, Some(h), Some(l)) => Some((pa, h, l)),
            _ => None,
        };
        Ok(Template { base, compiled })
    }

    /// The outer filter for one command whose program path string lives at `path_addr`:
    /// the same instructions [`program`] compiles.
    pub fn program(&self, path_addr: u64) -> Result<Vec<Insn>, Error> {
        match &self.compiled {
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
                let t = Template::new(base.clone()).unwrap();
                assert!(t.compiled.is_some(), "{name}: the address was located");
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
