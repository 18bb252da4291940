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
