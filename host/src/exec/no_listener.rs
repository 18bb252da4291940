//! Runs where seccomp filters cannot have a listener (gVisor, whose seccomp refuses
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER` with EINVAL; container profiles that copy it; kernels
//! before 5.0). The filter is still installed, exactly as the profile says, but the answers the
//! host's supervisor would have given to refused calls are put in the filter itself: the
//! profile's errno under `--on-violation report`, the end of the process (`KILL_PROCESS`, so
//! SIGSYS, as the supervisor's kill) under `kill`. What is lost is the name: the host never
//! sees the call, so a result has no `violation` entry and the run says so, once, as a warning;
//! the refusal lines taken from the program's stderr (module `refusals`) still apply.
//!
//! Decided here rather than refused: the listener only names refusals, it enforces nothing,
//! so running without it keeps every protection (rule: degrade loudly, never less strict).
//! `sandbox learn`, which is nothing but the listener, is refused instead (in `run`).

use super::notify::Response;
use crate::policy::action::{RET_ERRNO, RET_KILL_PROCESS, RET_USER_NOTIF};
use crate::sandbox::Plan;

/// Puts `response` into `plan`'s filter in place of the notifications it would send, and says
/// so in the plan's warnings; `why` is the probe's reason.
pub(super) fn answer_in_filter(plan: &mut Plan, response: Response, why: &str) {
    let Some(prog) = plan.filter.as_mut() else {
        return;
    };
    let what = answer_in_program(prog, response);
    plan.notify = false;
    plan.warnings.push(format!(
        "sandbox: warning: {why}; {what}, and the host cannot name the refused call (results \
         have no violation entry); every other protection is unchanged"
    ));
}

/// Puts `response` into `prog` in place of the notifications it would send (a session's
/// filter, compiled after its job was planned, where the plan's warning was given); returns
/// what refused calls then do, in words.
pub(crate) fn answer_in_program(prog: &mut [crate::policy::Insn], response: Response) -> String {
    let (to, what) = match response {
        Response::Errno(e) => (
            RET_ERRNO | u32::from(e),
            format!("refused calls fail with errno {e} in the filter itself"),
        ),
        Response::Kill => (
            RET_KILL_PROCESS,
            "a refused call ends the program with SIGSYS in the filter itself".to_string(),
        ),
    };
    crate::policy::bpf::retarget(prog, RET_USER_NOTIF, to);
    what
}

/// The warning for a program that died of SIGSYS when no listener could name the call.
pub(super) fn sigsys_warning(profile: &str) -> String {
    format!(
        "sandbox: the program was ended by SIGSYS: profile {profile} refused a call, which \
         cannot be named here (no seccomp listener); rerun with --on-violation report to see \
         the program's own error, or where seccomp user notification works to name it"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::action::RET_ALLOW;
    use crate::policy::Insn;

    fn ret(k: u32) -> Insn {
        Insn {
            code: crate::policy::bpf::RET_K,
            jt: 0,
            jf: 0,
            k,
        }
    }

    fn plan(prog: Vec<Insn>) -> Plan {
        Plan {
            planned: crate::sandbox::Sandboxed::Exact,
            warnings: Vec::new(),
            filter: Some(prog),
            notify: true,
            preload_env: Vec::new(),
        }
    }

    #[test]
    fn notifications_become_the_supervisors_answer_and_the_run_says_so() {
        let mut p = plan(vec![ret(RET_USER_NOTIF), ret(RET_ALLOW)]);
        answer_in_filter(&mut p, Response::Errno(1), "no listener");
        let f = p.filter.as_ref().unwrap();
        assert_eq!(f[0].k, RET_ERRNO | 1);
        assert_eq!(f[1].k, RET_ALLOW);
        assert!(!p.notify);
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains("no listener"), "{:?}", p.warnings);
        let mut p = plan(vec![ret(RET_USER_NOTIF)]);
        answer_in_filter(&mut p, Response::Kill, "no listener");
        assert_eq!(p.filter.as_ref().unwrap()[0].k, RET_KILL_PROCESS);
    }
}
