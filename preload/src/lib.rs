//! `libsandbox.so`: reads `SECCOMP_SYSCALL_ALLOW`, `SECCOMP_SYSCALL_DENY` and
//! `SECCOMP_DEFAULT_ACTION` in a constructor and installs the seccomp filter before `main`.
//!
//! It runs inside other people's programs, so: no `std` in the shipped build (no unwinding, no
//! libgcc_s, a small file), no allocation, no output unless asked or failing, and nothing after
//! the filter is installed but returning. When a filter was asked for and cannot be installed,
//! the process exits with status [`FAIL_STATUS`] before `main` runs: it never runs unfiltered.
//!
//! The shipped build uses `panic = "abort"` and is `no_std`; the workspace's unwinding test
//! builds link `std` instead only because a `no_std` cdylib cannot unwind. Nothing else differs.
#![cfg_attr(panic = "abort", no_std)]

mod env;
mod landlock;
mod out;
mod trap;

use sandbox_policy::{bpf, grammar, Action, Insn, Policy, NATIVE};

pub use out::FAIL_STATUS;

#[cfg(panic = "abort")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    out::die(format_args!("internal error"), None)
}

/// What went wrong, for the one line printed on failure.
enum Failure {
    Policy(sandbox_policy::Error),
    Compile(sandbox_policy::ErrorKind),
    Install(sandbox_policy::InstallError),
    Landlock(landlock::Error),
    ReportFd,
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Failure::Policy(e) => write!(f, "{e}"),
            Failure::Compile(e) => write!(f, "{e}"),
            Failure::Install(e) => write!(f, "{e}"),
            Failure::Landlock(e) => write!(f, "{e}"),
            Failure::ReportFd => f.write_str("SECCOMP_REPORT_FD: not an open descriptor number"),
        }
    }
}

/// Parses, compiles and installs; every error is fatal for the process.
fn setup(envp: *mut *mut libc::c_char) -> Result<(), (Failure, Option<i32>)> {
    let vars = env::Vars::read(envp);
    if !vars.any() {
        return Ok(());
    }
    let report_fd = match vars.report_fd {
        None => None,
        Some(text) => Some(env::parse_fd(text).ok_or((Failure::ReportFd, None))?),
    };
    let fail = |f| (f, report_fd);
    // Landlock first: the seccomp filter below may refuse the Landlock calls.
    if let Some(text) = vars.landlock {
        let applied = landlock::apply(text).map_err(|e| fail(Failure::Landlock(e)))?;
        if !applied.missing.is_empty() {
            // Degrading was allowed (`mode preferred`), so it is said, on every run.
            out::line(
                2,
                format_args!(
                    "libsandbox: Landlock protections missing: {} (kernel ABI {}, used {})",
                    applied.missing, applied.kernel, applied.abi
                ),
            );
        }
        if vars.verbose {
            out::line(
                2,
                format_args!(
                    "libsandbox: Landlock ABI {}: {} rules",
                    applied.abi, applied.rules
                ),
            );
        }
    }
    let mut policy = Policy::new(NATIVE, sandbox_policy::Mode::DenyList, Action::Kill);
    let wanted = grammar::from_env(
        NATIVE,
        vars.allow,
        vars.deny,
        vars.default_action,
        &mut policy,
    )
    .map_err(|e| fail(Failure::Policy(e)))?;
    let verbose = vars.verbose;
    let trap_alone = vars.default_action.and_then(Action::parse) == Some(Action::Trap);
    // The program must not see its configuration; the values are not needed past this point.
    env::scrub(envp);
    if !wanted {
        if vars.landlock.is_some() {
            // Landlock without a seccomp list (`sandbox env --profile unrestricted`): a filter
            // that allows everything, so the process still carries the seccomp mark `sandbox
            // serve` refuses peers by (a Landlock domain cannot be seen from outside).
            mark().map_err(|e| fail(Failure::Install(e)))?;
        }
        // No list: no filter of ours. `trap` alone still arms the handler, so the calls a
        // filter installed by someone else traps (the host's outer filter) are named.
        if trap_alone {
            trap::arm(report_fd);
            if let Some(fd) = report_fd {
                out::keep_private(fd);
                out::line(fd, format_args!("armed"));
            }
        }
        return Ok(());
    }
    let mut prog = [Insn::default(); bpf::MAX_INSNS];
    let len = bpf::compile(&policy, &mut prog).map_err(|e| fail(Failure::Compile(e)))?;
    if policy.uses(Action::Trap) {
        trap::arm(report_fd);
    }
    if let Some(fd) = report_fd {
        out::keep_private(fd);
    }
    if verbose {
        out::line(
            2,
            format_args!(
                "libsandbox: installing {} filter: {} instructions, default action {}",
                match policy.mode() {
                    sandbox_policy::Mode::AllowList => "allow-list",
                    sandbox_policy::Mode::DenyList => "deny-list",
                },
                len,
                policy.default_action()
            ),
        );
    }
    // The handshake goes out before the filter: a filter may forbid write. If installing fails
    // the process exits below, so "ready" followed by a running program means "filtered".
    if let Some(fd) = report_fd {
        out::line(fd, format_args!("ready {len}"));
    }
    sandbox_policy::install(&prog[..len]).map_err(|e| fail(Failure::Install(e)))
}

/// Installs a one-instruction filter that allows every call: the kernel counts it in
/// `Seccomp_filters` of this process and of everything it starts, and its constant result is
/// cached per syscall by the kernel, so it costs nothing per call.
fn mark() -> Result<(), sandbox_policy::InstallError> {
    let allow = Insn {
        code: bpf::RET_K,
        jt: 0,
        jf: 0,
        k: Action::Allow.ret(),
    };
    sandbox_policy::install(&[allow])
}

extern "C" fn init(
    _argc: libc::c_int,
    _argv: *mut *mut libc::c_char,
    envp: *mut *mut libc::c_char,
) {
    if let Err((failure, report_fd)) = setup(envp) {
        out::die(format_args!("{failure}"), report_fd);
    }
}

/// glibc calls `.init_array` entries with (argc, argv, envp) before the program's `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn(libc::c_int, *mut *mut libc::c_char, *mut *mut libc::c_char) = init;
