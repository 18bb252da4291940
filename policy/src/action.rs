//! What a filter does with a syscall: the actions of `SECCOMP_DEFAULT_ACTION` and of `=ACTION`
//! suffixes, and their `SECCOMP_RET_*` encodings.

use crate::consts;

/// The outcome of a filter decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Kill the whole process with SIGSYS (`SECCOMP_RET_KILL_PROCESS`).
    Kill,
    /// Deliver SIGSYS to the preload's handler, which names the call and then ends the process.
    Trap,
    /// Fail the call with this errno without running it.
    Errno(u16),
    /// Run the call and write an audit record (`SECCOMP_RET_LOG`).
    Log,
    /// Run the call.
    Allow,
}

/// `SECCOMP_RET_KILL_PROCESS`.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_TRAP`.
pub const RET_TRAP: u32 = 0x0003_0000;
/// `SECCOMP_RET_ERRNO` (the errno goes in the low 16 bits).
pub const RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_USER_NOTIF`: the call waits for the supervisor holding the filter's listener.
/// Not an [`Action`] of the grammar (a program cannot hold its own listener); the exec runtime
/// turns `trap` into it with [`crate::bpf::retarget`] to name violations without a preload.
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// `SECCOMP_RET_LOG`.
pub const RET_LOG: u32 = 0x7ffc_0000;
/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;

/// The largest errno a filter may return (the kernel's MAX_ERRNO).
pub const MAX_ERRNO: u16 = 4095;

impl Action {
    /// The value a BPF `ret` instruction returns for this action.
    pub const fn ret(self) -> u32 {
        match self {
            Action::Kill => RET_KILL_PROCESS,
            Action::Trap => RET_TRAP,
            Action::Errno(e) => RET_ERRNO | e as u32,
            Action::Log => RET_LOG,
            Action::Allow => RET_ALLOW,
        }
    }

    /// The action a `ret` value stands for, if it is one of ours.
    pub const fn from_ret(ret: u32) -> Option<Action> {
        match ret {
            RET_KILL_PROCESS => Some(Action::Kill),
            RET_TRAP => Some(Action::Trap),
            RET_LOG => Some(Action::Log),
            RET_ALLOW => Some(Action::Allow),
            r if r & 0xffff_0000 == RET_ERRNO => Some(Action::Errno((r & 0xffff) as u16)),
            _ => None,
        }
    }

    /// How strict the action is; the kernel and our rule order both let the strictest win.
    pub const fn severity(self) -> u8 {
        match self {
            Action::Kill => 4,
            Action::Trap => 3,
            Action::Errno(_) => 2,
            Action::Log => 1,
            Action::Allow => 0,
        }
    }

    /// Parses `SECCOMP_DEFAULT_ACTION`: `kill`, `trap`, `log`, `allow`, `errno`, `errno:NAME`
    /// or `errno:NUMBER`. Errno names alone (`EACCES`) are accepted too, as in `=ACTION`.
    pub fn parse(text: &str) -> Option<Action> {
        match text {
            "kill" => return Some(Action::Kill),
            "trap" => return Some(Action::Trap),
            "log" => return Some(Action::Log),
            "allow" => return Some(Action::Allow),
            "errno" => return Some(Action::Errno(1)),
            _ => {}
        }
        let errno = text.strip_prefix("errno:").unwrap_or(text);
        if let Some(e) = consts::errno(errno) {
            return Some(Action::Errno(e));
        }
        if text.starts_with("errno:") {
            if let Ok(n) = errno.parse::<u16>() {
                if (1..=MAX_ERRNO).contains(&n) && !errno.starts_with('+') {
                    return Some(Action::Errno(n));
                }
            }
        }
        None
    }
}

impl core::fmt::Display for Action {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Action::Kill => f.write_str("kill"),
            Action::Trap => f.write_str("trap"),
            Action::Log => f.write_str("log"),
            Action::Allow => f.write_str("allow"),
            Action::Errno(e) => match consts::errno_name(*e) {
                Some(name) => write!(f, "errno:{name}"),
                None => write!(f, "errno:{e}"),
            },
        }
    }
}
