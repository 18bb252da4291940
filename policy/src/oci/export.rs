//! A profile as OCI seccomp JSON, decision for decision.
//!
//! Our rules for one call are tried in order and the first that holds decides; OCI entries
//! under runc have no order worth relying on (see the module above). So each call's argument
//! space is cut into pieces that never overlap, each with one action:
//!
//! - a call whose decision does not depend on its arguments gets one entry without `args`
//!   (none when its action is the default action);
//! - a call whose rules all look at one argument is split bit by bit, highest bit first, into
//!   `SCMP_CMP_MASKED_EQ` pieces over the bits its rules test, stopping wherever the decision
//!   no longer depends on the remaining bits. Masks stay inside the bits a rule compares, so a
//!   32-bit rule (`a1 == TIOCSTI`) keeps ignoring the upper half exactly as ours does;
//! - a call whose rules look at several arguments gets one entry per alternative, when the
//!   alternatives of different actions provably never overlap and the calls nothing matches
//!   get the default action.
//!
//! Anything else is written as the strictest action the call can get, and said in a note.

use super::eval::{Arg, Entry, Filter, Op};
use super::names::{scmp_action, scmp_arch};
use crate::action::Action;
use crate::arch::Arch;
use crate::error::Error;
use crate::policy::{CmpOp, Cond, Policy, Width};
use crate::profile::Profile;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// Pieces one call may be cut into before it is written as its strictest action instead.
const MAX_PIECES: usize = 512;

/// An exported profile.
#[derive(Clone, Debug)]
pub struct Export {
    /// The JSON object.
    pub filter: Filter,
    /// The JSON text, pretty-printed, ending in a newline.
    pub json: String,
    /// What the JSON cannot say the way the profile does, one sentence each; empty when the
    /// JSON decides every call exactly as the profile does.
    pub notes: Vec<String>,
}

/// Writes `profile` (with `action` replacing its default action, as `--on-violation` does)
/// as an OCI seccomp object for `arch`.
pub fn export(profile: &Profile, arch: Arch, action: Option<Action>) -> Result<Export, Error> {
    let mut notes = Vec::new();
    let Some(policy) = profile.policy(arch, action)? else {
        let filter = Filter {
            default_action: "SCMP_ACT_ALLOW".into(),
            default_errno_ret: None,
            architectures: std::vec![scmp_arch(arch).to_string()],
            syscalls: Vec::new(),
        };
        return Ok(finish(filter, notes));
    };
    let default = policy.fallback();
    let mut pieces: Vec<(Action, Vec<Arg>, &'static str)> = Vec::new();
    for (name, nr) in crate::syscalls::all(arch) {
        let nr = u32::from(nr);
        if let Some(a) = policy.constant_decision(nr) {
            if a != default {
                pieces.push((a, Vec::new(), name));
            }
            continue;
        }
        let split = match single_argument(&policy, nr) {
            Some((arg, width)) => by_bits(&policy, nr, arg, width),
            None => by_alternatives(&policy, nr),
        };
        match split {
            Some(list) => pieces.extend(
                list.into_iter()
                    .filter(|(a, _)| *a != default)
                    .map(|(a, args)| (a, args, name)),
            ),
            None => {
                let a = strictest(&policy, nr);
                notes.push(format!(
                    "{name}: its argument rules cannot be written as OCI entries; every call gets {a}"
                ));
                if a != default {
                    pieces.push((a, Vec::new(), name));
                }
            }
        }
    }
    // What runc does between installing the filter and starting the program (measured with
    // runc 1.1): it opens its exec fifo write-only, then calls execve.
    let at_fdcwd = -100i64 as u64;
    let start: [(&str, [u64; 6], &str); 2] = [
        (
            "openat",
            [at_fdcwd, 0, 0o2000001, 0, 0, 0],
            "a write-only openat",
        ),
        ("execve", [0; 6], "execve"),
    ];
    let refused: Vec<String> = start
        .iter()
        .filter_map(|(name, args, what)| {
            let a = policy.decide(arch.syscall_number(name)?, args);
            (a != Action::Allow).then(|| format!("{what} ({a})"))
        })
        .collect();
    if !refused.is_empty() {
        notes.push(format!(
            "runc needs a write-only openat (its exec fifo) and execve after installing the \
             filter; this profile refuses {}, so a container cannot start with it (see \
             docs/containers.md)",
            refused.join(" and ")
        ));
    }
    if policy.uses(Action::Trap) {
        notes.push(
            "trap is SCMP_ACT_TRAP: without the preload's handler the program ends with SIGSYS \
             and the call is not named"
                .to_string(),
        );
    }
    // One entry per (action, comparisons), naming every call that shares them.
    let mut entries: Vec<Entry> = Vec::new();
    for (a, args, name) in pieces {
        let (act, errno) = scmp_action(a);
        match entries
            .iter_mut()
            .find(|e| e.action == act && e.errno_ret == errno && e.args == args)
        {
            Some(e) => e.names.push(name.to_string()),
            None => entries.push(Entry {
                names: std::vec![name.to_string()],
                action: act.to_string(),
                errno_ret: errno,
                args,
            }),
        }
    }
    for e in &mut entries {
        e.names.sort();
    }
    let (act, errno) = scmp_action(default);
    let filter = Filter {
        default_action: act.to_string(),
        default_errno_ret: errno,
        architectures: std::vec![scmp_arch(arch).to_string()],
        syscalls: entries,
    };
    Ok(finish(filter, notes))
}

fn finish(filter: Filter, notes: Vec<String>) -> Export {
    let mut json = serde_json::to_string_pretty(&filter).unwrap_or_default();
    json.push('\n');
    Export {
        filter,
        json,
        notes,
    }
}

/// The conditions of every rule for `nr`.
fn conds<'a>(policy: &'a Policy, nr: u32) -> impl Iterator<Item = &'a Cond> + 'a {
    policy
        .rules_for(nr)
        .iter()
        .flat_map(move |r| policy.alternatives(r))
        .flatten()
}

/// The one argument (and width) every rule for `nr` compares, if there is one.
fn single_argument(policy: &Policy, nr: u32) -> Option<(u8, Width)> {
    let mut it = conds(policy, nr);
    let first = it.next()?;
    it.all(|c| c.arg == first.arg && c.width == first.width)
        .then_some((first.arg, first.width))
}

fn width_mask(w: Width) -> u64 {
    match w {
        Width::W32 => 0xffff_ffff,
        Width::W64 => u64::MAX,
    }
}

/// Whether `c` holds for every (`Some(true)`), no (`Some(false)`) or some values whose bits
/// under `known` are those of `fixed`.
fn cond_on_prefix(c: &Cond, known: u64, fixed: u64) -> Option<bool> {
    let cm = c.mask & width_mask(c.width);
    let v = c.value;
    let eq = || {
        if v & !cm != 0 || (fixed ^ v) & cm & known != 0 {
            Some(false)
        } else if cm & !known == 0 {
            Some(true)
        } else {
            None
        }
    };
    let lo = fixed & cm;
    let hi = lo | (cm & !known);
    let range = |always: bool, never: bool| {
        if always {
            Some(true)
        } else if never {
            Some(false)
        } else {
            None
        }
    };
    match c.op {
        CmpOp::Eq => eq(),
        CmpOp::Ne => eq().map(|b| !b),
        CmpOp::Lt => range(hi < v, lo >= v),
        CmpOp::Le => range(hi <= v, lo > v),
        CmpOp::Gt => range(lo > v, hi <= v),
        CmpOp::Ge => range(lo >= v, hi < v),
    }
}

/// The decision for `nr` when the compared argument has `fixed` under `known`, if it is the
/// same for every such value.
fn decide_on_prefix(policy: &Policy, nr: u32, known: u64, fixed: u64) -> Option<Action> {
    for rule in policy.rules_for(nr) {
        if Policy::is_unconditional(rule) {
            return Some(rule.action);
        }
        let mut holds = Some(false);
        for alt in policy.alternatives(rule) {
            let mut all = Some(true);
            for c in alt {
                match cond_on_prefix(c, known, fixed) {
                    Some(true) => {}
                    Some(false) => {
                        all = Some(false);
                        break;
                    }
                    None => all = None,
                }
            }
            match all {
                Some(true) => {
                    holds = Some(true);
                    break;
                }
                Some(false) => {}
                None => holds = None,
            }
        }
        match holds {
            Some(true) => return Some(rule.action),
            Some(false) => {}
            None => return None,
        }
    }
    Some(if policy.is_allowed(nr) {
        Action::Allow
    } else {
        policy.fallback()
    })
}

/// Cuts the values of one argument into masked pieces with one decision each.
fn by_bits(policy: &Policy, nr: u32, arg: u8, width: Width) -> Option<Vec<(Action, Vec<Arg>)>> {
    let tested = conds(policy, nr).fold(0u64, |m, c| m | (c.mask & width_mask(width)));
    let bits: Vec<u64> = (0..64)
        .rev()
        .map(|b| 1u64 << b)
        .filter(|b| tested & b != 0)
        .collect();
    let mut out = Vec::new();
    // Depth-first, the 0 branch before the 1 branch: the order is part of the output, and the
    // output must be the same on every run.
    let mut stack = std::vec![(0u64, 0u64, 0usize)];
    while let Some((known, fixed, depth)) = stack.pop() {
        if let Some(a) = decide_on_prefix(policy, nr, known, fixed) {
            let args = if known == 0 {
                Vec::new()
            } else {
                std::vec![Arg {
                    index: arg,
                    value: known,
                    value_two: fixed,
                    op: Op::MaskedEq,
                }]
            };
            out.push((a, args));
            if out.len() > MAX_PIECES {
                return None;
            }
            continue;
        }
        let bit = *bits.get(depth)?;
        stack.push((known | bit, fixed | bit, depth + 1));
        stack.push((known | bit, fixed, depth + 1));
    }
    Some(out)
}

/// One condition as one comparison with the same meaning, if there is one.
fn as_arg(c: &Cond) -> Option<Arg> {
    let full = width_mask(c.width);
    let mask = c.mask & full;
    let arg = |op, value, value_two| {
        Some(Arg {
            index: c.arg,
            value,
            value_two,
            op,
        })
    };
    match (c.op, c.width) {
        (CmpOp::Eq, _) if mask == u64::MAX => arg(Op::Eq, c.value, 0),
        (CmpOp::Eq, _) => arg(Op::MaskedEq, mask, c.value),
        (op, Width::W64) if mask == u64::MAX => arg(
            match op {
                CmpOp::Ne => Op::Ne,
                CmpOp::Lt => Op::Lt,
                CmpOp::Le => Op::Le,
                CmpOp::Gt => Op::Gt,
                _ => Op::Ge,
            },
            c.value,
            0,
        ),
        _ => None,
    }
}

/// The (mask, value) an equality comparison pins, for the overlap check.
fn pinned(a: &Arg) -> Option<(u64, u64)> {
    match a.op {
        Op::Eq => Some((u64::MAX, a.value)),
        Op::MaskedEq => Some((a.value, a.value_two)),
        _ => None,
    }
}

/// Whether no call can satisfy both lists of comparisons.
fn disjoint(x: &[Arg], y: &[Arg]) -> bool {
    x.iter().any(|a| {
        y.iter().any(|b| {
            a.index == b.index
                && matches!((pinned(a), pinned(b)), (Some((ma, va)), Some((mb, vb))) if (va ^ vb) & ma & mb != 0)
        })
    })
}

/// One entry per alternative, for calls whose rules compare several arguments.
fn by_alternatives(policy: &Policy, nr: u32) -> Option<Vec<(Action, Vec<Arg>)>> {
    let rest = if policy.is_allowed(nr) {
        Action::Allow
    } else {
        policy.fallback()
    };
    if rest != policy.fallback() {
        return None;
    }
    let mut out: Vec<(Action, Vec<Arg>)> = Vec::new();
    for rule in policy.rules_for(nr) {
        for alt in policy.alternatives(rule) {
            let mut args: Vec<Arg> = Vec::new();
            for c in alt {
                let a = as_arg(c)?;
                // One comparison per argument and entry (runc splits repeated ones).
                if args.iter().any(|b| b.index == a.index) {
                    return None;
                }
                args.push(a);
            }
            if out
                .iter()
                .any(|(o, prev)| *o != rule.action && !disjoint(prev, &args))
            {
                return None;
            }
            out.push((rule.action, args));
        }
    }
    Some(out)
}

/// The strictest decision `nr` can get.
fn strictest(policy: &Policy, nr: u32) -> Action {
    let rest = if policy.is_allowed(nr) {
        Action::Allow
    } else {
        policy.fallback()
    };
    policy
        .rules_for(nr)
        .iter()
        .map(|r| r.action)
        .chain([rest])
        .max_by_key(|a| a.severity())
        .unwrap_or(rest)
}
