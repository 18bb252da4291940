//! The JSON shape shared by export and the tests, and what runc with libseccomp decides for a
//! call under it: the reference the export is checked against without starting a container.

use crate::action::Action;
use serde::{Deserialize, Serialize};
use std::string::String;
use std::vec::Vec;

/// An OCI `linux.seccomp` object, as this crate writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    /// `SCMP_ACT_*` for calls no entry matches.
    pub default_action: String,
    /// The errno of a `SCMP_ACT_ERRNO` default action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_errno_ret: Option<u16>,
    /// `SCMP_ARCH_*`: calls of any other ABI (i386, x32) get libseccomp's bad-architecture
    /// action, which kills.
    pub architectures: Vec<String>,
    /// The entries.
    pub syscalls: Vec<Entry>,
}

/// One entry of `syscalls`: `action` for the named calls when every comparison holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Syscall names.
    pub names: Vec<String>,
    /// `SCMP_ACT_*`.
    pub action: String,
    /// The errno of `SCMP_ACT_ERRNO`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u16>,
    /// Comparisons that must all hold; none means always.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<Arg>,
}

/// One comparison: `args[index] op value`, or `args[index] & value == valueTwo` for
/// `SCMP_CMP_MASKED_EQ`; on all 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Arg {
    /// Argument index, 0 to 5.
    pub index: u8,
    /// The value (the mask for `SCMP_CMP_MASKED_EQ`).
    pub value: u64,
    /// The value compared after masking (`SCMP_CMP_MASKED_EQ` only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub value_two: u64,
    /// The comparison.
    pub op: Op,
}

/// `SCMP_CMP_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Op {
    /// `==`
    #[serde(rename = "SCMP_CMP_EQ")]
    Eq,
    /// `!=`
    #[serde(rename = "SCMP_CMP_NE")]
    Ne,
    /// `<`
    #[serde(rename = "SCMP_CMP_LT")]
    Lt,
    /// `<=`
    #[serde(rename = "SCMP_CMP_LE")]
    Le,
    /// `>`
    #[serde(rename = "SCMP_CMP_GT")]
    Gt,
    /// `>=`
    #[serde(rename = "SCMP_CMP_GE")]
    Ge,
    /// `(arg & value) == valueTwo`
    #[serde(rename = "SCMP_CMP_MASKED_EQ")]
    MaskedEq,
}

impl Op {
    /// Parses `SCMP_CMP_*`.
    pub fn from_name(name: &str) -> Option<Op> {
        Some(match name {
            "SCMP_CMP_EQ" => Op::Eq,
            "SCMP_CMP_NE" => Op::Ne,
            "SCMP_CMP_LT" => Op::Lt,
            "SCMP_CMP_LE" => Op::Le,
            "SCMP_CMP_GT" => Op::Gt,
            "SCMP_CMP_GE" => Op::Ge,
            "SCMP_CMP_MASKED_EQ" => Op::MaskedEq,
            _ => return None,
        })
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Arg {
    /// Whether the comparison holds for these arguments.
    pub fn matches(&self, args: &[u64; 6]) -> bool {
        let a = args[usize::from(self.index).min(5)];
        match self.op {
            Op::Eq => a == self.value,
            Op::Ne => a != self.value,
            Op::Lt => a < self.value,
            Op::Le => a <= self.value,
            Op::Gt => a > self.value,
            Op::Ge => a >= self.value,
            Op::MaskedEq => a & self.value == self.value_two,
        }
    }
}

/// What a filter does with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// One of our actions.
    Action(Action),
    /// An action this crate has no counterpart for (`SCMP_ACT_TRACE`, `SCMP_ACT_NOTIFY`).
    Other,
}

/// Our action for `SCMP_ACT_*` with its errno (EPERM when none is given, as runc does).
pub(crate) fn parse_action(name: &str, errno: Option<u16>) -> Option<Decision> {
    Some(Decision::Action(match name {
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" | "SCMP_ACT_KILL_PROCESS" => Action::Kill,
        "SCMP_ACT_TRAP" => Action::Trap,
        "SCMP_ACT_ERRNO" => Action::Errno(errno.unwrap_or(1)),
        "SCMP_ACT_LOG" => Action::Log,
        "SCMP_ACT_ALLOW" => Action::Allow,
        "SCMP_ACT_TRACE" | "SCMP_ACT_NOTIFY" => return Some(Decision::Other),
        _ => return None,
    }))
}

impl Filter {
    /// What runc with libseccomp decides for `name` with `args` (a call of the filter's own
    /// architecture): entries whose action is the default are skipped; an entry without
    /// comparisons wins over every entry with them; otherwise the first entry whose
    /// comparisons all hold; otherwise the default action.
    pub fn decide(&self, name: &str, args: &[u64; 6]) -> Decision {
        let default =
            parse_action(&self.default_action, self.default_errno_ret).unwrap_or(Decision::Other);
        let live = || {
            self.syscalls
                .iter()
                .filter(move |e| e.names.iter().any(|n| n == name))
                .filter_map(|e| Some((e, parse_action(&e.action, e.errno_ret)?)))
                .filter(move |(_, d)| *d != default)
        };
        if let Some((_, d)) = live().find(|(e, _)| e.args.is_empty()) {
            return d;
        }
        live()
            .find(|(e, _)| e.args.iter().all(|a| a.matches(args)))
            .map_or(default, |(_, d)| d)
    }
}
