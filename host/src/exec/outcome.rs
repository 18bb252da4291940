//! A job's outcome: everything reaped and gathered once it ended, then said as one result
//! (exit, signal, output, the layers that held and what was missing, refused calls and the
//! refusals its stderr reported, limits hit, leaks).

use super::job::{Job, Live};
use super::leaks::{Leak, Scanner};
use super::notify::Tally;
use super::request::{Streams, Validated};
use super::result::{ExecError, ExecResult, SandboxInfo, Violation};
use super::supervise::{Watched, DRAIN};
use crate::policy::profile::Profile;
use crate::policy::NATIVE;
use crate::report::ReportPipe;
use crate::sandbox::{Sandbox, Sandboxed};
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

/// What a job left once every process of it was reaped: the plan's parts the report needs,
/// and what was gathered.
pub(super) struct Ended {
    here: PathBuf,
    plan: crate::sandbox::Plan,
    broad: Option<String>,
    layer: Option<super::paths::Layer>,
    started_at: SystemTime,
    isolation: Result<super::isolation::Layer, String>,
    root_warning: Vec<String>,
    network_mode: crate::network::Mode,
    namespaces: Option<super::spawn::Namespaces>,
    memory: super::limits::MemoryBound,
    report: Option<ReportPipe>,
    net_warning: Option<String>,
    /// The job had an init (namespaces).
    init: bool,
    tally: Tally,
    /// What the supervisor refused making for the job (module `emulate`).
    emulated_refused: super::emulate::Tally,
    status: i32,
    written_blocks: Option<u64>,
    counts: super::hits::Counts,
    reverted: Option<Vec<super::git_guard::Reverted>>,
    stdout: String,
    stdout_truncated: bool,
    stderr: String,
    stderr_truncated: bool,
    leaks: Vec<Leak>,
    teed: Option<String>,
    network: super::net::Report,
    timed_out: bool,
    cancelled: bool,
}

/// Reaps the job (the program, then every orphan adopted), ends its group, checks the
/// repository's control files and gathers its output, leaks and network report.
pub(super) fn collect(
    v: &Validated,
    job: Job,
    live: Live,
    watched: Watched,
) -> Result<Ended, ExecError> {
    let Job {
        here,
        plan,
        broad,
        layer,
        started_at,
        isolation,
        git_guard,
        root_warning,
        net,
        namespaces,
        tee,
        pid_namespace,
        mut group,
        memory,
        registration,
        ..
    } = job;
    let Live {
        pid,
        pidfd,
        init,
        served,
        net_warning,
        report,
        ..
    } = live;
    let Watched {
        timed_out,
        cancelled,
        notified,
        out,
        err,
    } = watched;
    drop(pidfd);
    let tally = notified
        .filter(|t| !t.seen.is_empty())
        .unwrap_or_else(|| registration.slot().tally());
    // Every descendant is dead: reap the direct child, then the adopted orphans.
    let (status, written_blocks) =
        crate::sys::wait4(pid).map_err(super::result::Step::Reap.error())?;
    // The init of a PID namespace that exited by itself has killed and reaped every other
    // process of the run (spawn/init.rs), so its usage counts the writes of all of them.
    // Not so without a PID namespace (orphans go to this host or the system's init), nor
    // when the init was killed (a timeout, a cancel): the kernel then reaps the rest itself,
    // and their usage reaches no one (module `hits`).
    let written_blocks =
        (init.is_some() && pid_namespace && libc::WIFEXITED(status)).then_some(written_blocks);
    let status = init
        .as_ref()
        .and_then(|i| i.program_status())
        .unwrap_or(status);
    let counts = group.hits();
    group.finish();
    let emulated_refused = registration.slot().emulated();
    drop(registration);
    let reverted = git_guard.map(super::git_guard::Guard::check);

    let (mut stdout, stdout_truncated) = out.finish();
    let (mut stderr, stderr_truncated) = err.finish();
    let leaks = scan_leaks(v, &mut stdout, &mut stderr);
    let teed = tee.map(|t| t.finish(DRAIN));
    let network = served
        .as_ref()
        .map_or_else(super::net::Report::host, super::net::Running::finish);
    Ok(Ended {
        here,
        plan,
        broad,
        layer,
        started_at,
        isolation,
        root_warning,
        network_mode: net.mode,
        namespaces,
        memory,
        report,
        net_warning,
        init: init.is_some(),
        tally,
        emulated_refused,
        status,
        written_blocks,
        counts,
        reverted,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        leaks,
        teed,
        network,
        timed_out,
        cancelled,
    })
}

/// The result of an ended job: the layers that held (its tier) and the warnings for what was
/// missing, the refused calls with their advice, the limits hit, the refusals its stderr
/// reported.
pub(super) fn report(v: &Validated, sandbox: &Sandbox, ended: Ended, start: Instant) -> ExecResult {
    let Ended {
        here,
        plan,
        broad,
        layer,
        started_at,
        isolation,
        root_warning,
        network_mode,
        namespaces,
        memory,
        report,
        net_warning,
        init,
        tally,
        emulated_refused,
        status,
        written_blocks,
        counts,
        reverted,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        leaks,
        teed,
        network,
        timed_out,
        cancelled,
    } = ended;
    let mut warnings = plan.warnings;
    warnings.extend(broad);
    warnings.extend(net_warning);
    warnings.extend(root_warning);
    let mut filter = plan.planned;
    // The preload's handshake confirms the exact filter it stacks; without it only the
    // outer filter (with its loader exemptions) applied.
    let preload = report.map(ReportPipe::read_available);
    if let Some(r) = &preload {
        if !(r.ready && r.error.is_none()) && filter == Sandboxed::Exact {
            filter = Sandboxed::OuterOnly;
            warnings.push(format!(
                "sandbox: the preload did not confirm its filter{}; only the outer filter applied",
                r.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
    }
    if tally.refused.paced_since.is_some() {
        warnings.push(format!(
            "sandbox: the program made {} refused calls; past {} they were answered at most {} \
             a second (each costs the host work outside the job's limits): it was slowed, not \
             stopped",
            tally.refused.total,
            super::notify::FREE_CALLS,
            super::notify::PACED_RATE
        ));
    }
    if v.home_nowhere {
        warnings.push(super::home::NOWHERE.to_string());
    }
    if emulated_refused.made.paced_since.is_some() {
        warnings.push(format!(
            "sandbox: the host made {} of the program's calls for it (metadata changes, opens \
             that may write, connects); past {} they were answered at most {} a second (each \
             costs the host work outside the job's limits): it was slowed, not stopped",
            emulated_refused.made.total,
            super::notify::FREE_CALLS,
            super::notify::PACED_RATE
        ));
    }
    // The preload's `violation` line is written from inside the program's own process, which
    // can write that line too, and raise SIGSYS (or queue one with the seccomp `si_code`)
    // itself: a claim, never the kernel's word. Only the supervisor's record of a refused
    // call (the kernel's notification) names the filter; the claim is passed on as such.
    let claimed = preload.and_then(|r| r.violation).map(|(nr, _)| nr);
    // Degraded only because the caller allowed it (`preferred`): said on every run, with the
    // way to refuse instead in the caller's terms.
    let required = |layer: &str| match v.audience {
        super::request::Audience::Json => format!("pass {layer} \"required\""),
        super::request::Audience::Cli => format!("pass --{layer} required"),
    };
    // What the run's namespaces give anyway is not warned about as missing (module
    // `landlock_cover`); it is still listed in the layer's status.
    let others = super::landlock_cover::Others {
        pid_namespace: isolation.is_ok() && namespaces.as_ref().is_some_and(|n| n.isolate),
        net_namespace: isolation.is_ok() && namespaces.as_ref().is_some_and(|n| n.net),
        read_only_root: isolation.as_ref().is_ok_and(|l| l.status.read_only_root),
        no_tcp_sockets: filter != Sandboxed::None
            && super::landlock_cover::filter_refuses_tcp(sandbox),
    };
    if let Some((lacking, covered)) = layer
        .as_ref()
        .map(|l| super::landlock_cover::split(&l.prepared.status().missing, others))
        .filter(|(lacking, _)| !lacking.is_empty())
    {
        let covered = if covered.is_empty() {
            String::new()
        } else {
            format!(" (given here by other layers: {})", covered.join("; "))
        };
        warnings.push(format!(
            "sandbox: warning: Landlock protections missing {}: {}{covered}; {} to refuse instead",
            landlock_missing_where(),
            lacking.join("; "),
            required("landlock")
        ));
    }
    let landlock_held = layer
        .as_ref()
        .is_some_and(|l| !l.prepared.status().enforced.is_empty());
    let tier = super::tier::Tier::of(filter, landlock_held, isolation.is_ok());
    let private_tmp = isolation.as_ref().is_ok_and(|l| l.namespaces.private_tmp);
    let mut isolation = match isolation {
        Ok(l) => Some(l.status.clone()),
        Err(why) if why.is_empty() => None,
        Err(why) => {
            warnings.push(format!(
                "sandbox: warning: namespaces unavailable ({why}); ran in the {tier} tier ({}), \
                 without isolation (own PID space and /proc, private /tmp, read-only \
                 .git/hooks); {} to refuse instead",
                tier.layers(),
                required("isolation")
            ));
            Some(super::isolation::Status {
                mode: v.paths.isolation,
                namespaces: Vec::new(),
                read_only: Vec::new(),
                read_only_root: false,
                hidden_sockets: Vec::new(),
                unavailable: Some(why),
                reverted: Vec::new(),
            })
        }
    };
    if let (Some(i), Some(r)) = (isolation.as_mut(), reverted) {
        warnings.extend(r.iter().map(|r| r.warning.clone()));
        i.reverted = r;
    }
    let signal = match libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)) {
        // Ended with SIGKILL in place of SIGSYS (it had SIGSYS blocked, ignored or caught):
        // reported as the filter's kill, whatever the program was doing at the time.
        Some(libc::SIGKILL) if tally.program_sigkill => Some(libc::SIGSYS),
        s => s,
    };
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let limits_hit = limits_hit(
        v,
        sandbox,
        &here,
        layer.as_ref(),
        &super::hits::Writes {
            since: started_at,
            blocks: written_blocks,
        },
        signal,
        timed_out,
        stdout_truncated || stderr_truncated,
        &counts,
        [&stdout, teed.as_deref().unwrap_or(&stderr)],
        private_tmp,
        &mut warnings,
    );
    warnings.extend(memory.warning());
    let profile = &sandbox.options().profile;
    let asker = super::advice::Asker {
        audience: v.audience,
        // The command line extends a named profile in the spawner thread; a request's allow
        // list needs the listener handover (`handover_refused`).
        allow_works: matches!(v.audience, super::request::Audience::Cli)
            || init
            || crate::platform::running_as_root(),
        keep_no_network: v.network.mode.is_none() && network_mode == crate::network::Mode::None,
        unix_guarded: crate::platform::delegable(),
    };
    let entry = |nr: u32, program: Option<String>, count: u64, args: &[u64; 6]| {
        violation_entry(nr, program, count, args, &v.profile, profile, &asker)
    };
    let mut violations = violation_entries(&tally, &v.profile, profile, &asker);
    // Metadata calls the supervisor refused in the contained tier (module `emulate`).
    violations.extend(emulated_entries(&emulated_refused, v));
    if timed_out {
        let calls: Vec<&str> = violations.iter().map(|e| e.syscall.as_str()).collect();
        super::hits::time_after_refusals(&mut warnings, &calls);
    }
    let violation = match (signal, tally.killer.clone()) {
        (_, Some((nr, program))) => Some(
            violations
                .iter()
                .find(|e| e.number == Some(nr) && e.program == program)
                .cloned()
                .unwrap_or_else(|| entry(nr, program, 1, &[0; 6])),
        ),
        // SIGSYS without a refused call the supervisor saw: the program may have raised it
        // itself (or a kill rule of the profile ended it, which the kernel does not tell the
        // host): reported as the signal it is, the filter not named.
        _ => None,
    };
    if signal == Some(libc::SIGSYS)
        && violation.is_none()
        && sandbox.exact_outer_policy().is_some()
        && crate::platform::seccomp_listener().is_err()
    {
        warnings.push(super::no_listener::sigsys_warning(&v.profile));
    }
    if let (Some(libc::SIGSYS), None, Some(nr)) = (signal, &violation, claimed) {
        warnings.push(format!(
            "sandbox: the preload in the program's own process reported a refused call {} \
             ({nr}) before it died of SIGSYS; the kernel did not confirm it (a program can \
             write that report and raise SIGSYS itself)",
            NATIVE.syscall_name(nr).unwrap_or("unknown")
        ));
    }
    // The policy is resolved (the credential list, every writable place's links) only when
    // the job's stderr, or its captured stdout (mocha and other test runners print their
    // errors there), holds a line worth naming: most runs have none.
    let text = teed.as_deref().unwrap_or(&stderr);
    let on_stdout =
        v.streams == Streams::Capture && super::refusals::is_candidate(stdout.as_bytes());
    let both;
    let text = if on_stdout {
        both = format!("{text}\n{stdout}");
        both.as_str()
    } else {
        text
    };
    let mut refusals = if super::refusals::is_candidate(text.as_bytes()) {
        super::refusals::name(
            text,
            &super::refusals::Policy::of(
                v,
                sandbox,
                &here,
                layer.as_ref(),
                isolation.as_ref(),
                network.mode,
            ),
        )
    } else {
        super::refusals::Found::default()
    };
    super::refusals::proxied(&mut refusals, &network.destinations, v.audience);
    // What the supervisor refused is named once, by its violation entry.
    refusals.entries.retain(|e| {
        !e.path
            .as_deref()
            .is_some_and(|p| super::emulate::names(&emulated_refused, std::path::Path::new(p)))
    });
    warnings.extend(super::refusals::warnings(
        &refusals,
        v.audience,
        &crate::credentials::Context::current(),
    ));
    ExecResult {
        program: v.program.to_string_lossy().into_owned(),
        exit_code,
        signal,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration_s: start.elapsed().as_secs_f64(),
        timed_out,
        cancelled,
        violation,
        violations,
        violations_omitted: tally.omitted + emulated_refused.omitted,
        sandboxed: SandboxInfo {
            filter,
            profile: v.profile.clone(),
        },
        tier,
        warnings,
        landlock: layer.map(|l| l.prepared.status().clone()),
        limits_hit,
        leaks,
        isolation,
        network,
        refusals: refusals.entries,
        refusals_omitted: refusals.omitted,
        home: v.home.as_ref().map(|h| h.path.display().to_string()),
    }
}

/// The violation entries of the calls the contained tier's supervisor refused (module
/// `emulate`), each with the change that allows it, in `v`'s audience's words.
pub(crate) fn emulated_entries(refused: &super::emulate::Tally, v: &Validated) -> Vec<Violation> {
    refused
        .seen
        .iter()
        .map(|s| {
            let (hint, change) = super::emulate::advice(&s.refused.why, v.audience);
            Violation {
                syscall: NATIVE
                    .syscall_name(s.refused.nr)
                    .unwrap_or("unknown")
                    .to_string(),
                number: Some(s.refused.nr),
                count: s.count,
                program: s.program.clone(),
                profile: v.profile.clone(),
                hint,
                change,
            }
        })
        .collect()
}

/// Names the refusals a command's stderr or stdout reports in a result built outside this module (a
/// session's command), as `run` names them for a one-shot request: `refusals`, and one
/// `warnings` line each; a path the supervisor refused (`emulated`, named by its violation
/// entry) is not named twice; the destinations the session's proxy refused the command come
/// first, as a one-shot's do. Does nothing when the result has them already.
pub(crate) fn name_refusals(
    result: &mut ExecResult,
    v: &Validated,
    sandbox: &Sandbox,
    emulated: &super::emulate::Tally,
) {
    let refused_destinations = result.network.destinations.iter().any(|d| !d.allowed);
    // Stdout as well as stderr: test runners (mocha) print their errors there.
    let text = match (
        super::refusals::is_candidate(result.stderr.as_bytes()),
        super::refusals::is_candidate(result.stdout.as_bytes()),
    ) {
        (_, true) => Some(std::borrow::Cow::Owned(format!(
            "{}\n{}",
            result.stderr, result.stdout
        ))),
        (true, false) => Some(std::borrow::Cow::Borrowed(result.stderr.as_str())),
        (false, false) => None,
    };
    if !result.refusals.is_empty() || (!refused_destinations && text.is_none()) {
        return;
    }
    let cwd = v
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let mut found = if let Some(text) = &text {
        super::refusals::name(
            text,
            &super::refusals::Policy::of_reported(
                v,
                sandbox,
                &cwd,
                result.landlock.as_ref(),
                result.isolation.as_ref(),
                result.network.mode,
            ),
        )
    } else {
        super::refusals::Found::default()
    };
    // The destinations the session's proxy refused this command (its own record).
    super::refusals::proxied(&mut found, &result.network.destinations, v.audience);
    found.entries.retain(|e| {
        !e.path
            .as_deref()
            .is_some_and(|p| super::emulate::names(emulated, std::path::Path::new(p)))
    });
    result.warnings.extend(super::refusals::warnings(
        &found,
        v.audience,
        &crate::credentials::Context::current(),
    ));
    result.refusals = found.entries;
    result.refusals_omitted = found.omitted;
}

/// Finds secrets and tokens in the collected output (each stream whole, so a value split
/// across reads is found) and, when asked, redacts them. Output passed through to the host's
/// own streams is not seen here.
pub(crate) fn scan_leaks(v: &Validated, stdout: &mut String, stderr: &mut String) -> Vec<Leak> {
    // Nothing collected (streams passed through, or a silent program): nothing to scan, and
    // no automaton to build (a `sandbox run` would pay for it on every call).
    if stdout.is_empty() && stderr.is_empty() {
        return Vec::new();
    }
    let own;
    let scanner = if v.secrets.is_empty() {
        Scanner::shapes_only()
    } else {
        own = Scanner::new(&v.secrets);
        &own
    };
    let mut leaks = Vec::new();
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        let (found, redacted) = scanner.scan_and_redact(name, text, v.redact_secrets);
        leaks.extend(found);
        if let Some(r) = redacted {
            *text = r;
        }
    }
    leaks
}

/// One refused call as a result entry (`count` times, by `program`), with the advice `asker`
/// gets under `profile` (named `profile_name` in the entry). Shared by one-shot jobs and
/// session commands.
pub(crate) fn violation_entry(
    nr: u32,
    program: Option<String>,
    count: u64,
    args: &[u64; 6],
    profile_name: &str,
    profile: &Profile,
    asker: &super::advice::Asker,
) -> Violation {
    let advice = super::advice::advise(nr, args, profile, asker);
    Violation {
        syscall: NATIVE.syscall_name(nr).unwrap_or("unknown").to_string(),
        number: Some(nr),
        count,
        program,
        profile: profile_name.to_string(),
        hint: advice.hint,
        change: Some(advice.change),
    }
}

/// Every refused call the supervisor counted, as result entries in the order first seen.
pub(crate) fn violation_entries(
    tally: &Tally,
    profile_name: &str,
    profile: &Profile,
    asker: &super::advice::Asker,
) -> Vec<Violation> {
    tally
        .seen
        .iter()
        .map(|s| {
            violation_entry(
                s.nr,
                s.program.clone(),
                s.count,
                &s.args,
                profile_name,
                profile,
                asker,
            )
        })
        .collect()
}

/// The limits the run hit (module `hits`), each with its warning line added to `warnings`.
#[allow(clippy::too_many_arguments)]
fn limits_hit(
    v: &Validated,
    sandbox: &Sandbox,
    here: &std::path::Path,
    layer: Option<&super::paths::Layer>,
    writes: &super::hits::Writes,
    signal: Option<i32>,
    timed_out: bool,
    truncated: bool,
    counts: &super::hits::Counts,
    outputs: [&str; 2],
    private_tmp: bool,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    use super::hits::{file_at_limit, roots_to_search, warning, Hit};
    let json = v.audience == super::request::Audience::Json;
    let field = |j: &'static str, c: Option<&'static str>| if json { Some(j) } else { c };
    let mut hits = Vec::new();
    if timed_out {
        hits.push((
            Hit::Time,
            String::new(),
            field("timeout_s", Some("--timeout")),
        ));
    }
    if truncated && v.streams == Streams::Capture {
        hits.push((Hit::Output, String::new(), field("max_output_bytes", None)));
    }
    if signal == Some(libc::SIGXCPU) {
        hits.push((
            Hit::Cpu,
            String::new(),
            field("limits.cpu_seconds", Some("--timeout")),
        ));
    }
    if let Some(m) = &counts.memory {
        hits.push((
            Hit::Memory,
            m.detail(v.rlimits.memory_bytes),
            field("limits.memory_bytes", Some("--memory")),
        ));
    }
    if counts.processes > 0 {
        hits.push((
            Hit::Processes,
            format!(
                "{} fork{} refused at the process limit of {}",
                counts.processes,
                if counts.processes == 1 { "" } else { "s" },
                v.rlimits.processes
            ),
            field("limits.processes", Some("--processes")),
        ));
    }
    // The private /tmp and /dev/shm are sized within the job's memory (module `view`).
    if let (Some(m), true) = (v.rlimits.memory(), private_tmp) {
        if counts.memory.is_none() && outputs.iter().any(|o| super::hits::said_tmp_full(o)) {
            hits.push((
                Hit::Memory,
                format!(
                    "the job's /tmp or /dev/shm was full: they hold at most {} and {} MiB, \
                     within its memory of {} MiB",
                    (m / 4 * 3) >> 20,
                    (m / 4) >> 20,
                    m >> 20
                ),
                field("limits.memory_bytes", Some("--memory")),
            ));
        }
    }
    if counts.processes == 0
        && v.rlimits.processes != libc::RLIM_INFINITY
        && outputs.iter().any(|o| super::hits::said_fork_refused(o))
    {
        hits.push((
            Hit::Processes,
            format!(
                "a fork was refused at the process limit of {}",
                v.rlimits.processes
            ),
            field("limits.processes", Some("--processes")),
        ));
    }
    if outputs.iter().any(|o| super::hits::said_emfile(o)) {
        hits.push((
            Hit::Nofile,
            format!(" at the limit of {} open files", v.rlimits.nofile),
            field("limits.nofile", Some("`ulimit -n` before sandbox run")),
        ));
    }
    let fsize = v.rlimits.fsize_bytes;
    let fsize_field = field("limits.fsize_bytes", Some("`ulimit -f` before sandbox run"));
    if signal == Some(libc::SIGXFSZ) {
        hits.push((Hit::Fsize, format!(" of {fsize} bytes"), fsize_field));
    } else if fsize != libc::RLIM_INFINITY && super::paths::writes_allowed(sandbox) {
        // A descendant's SIGXFSZ is seen by its parent only: look for the file it left, where
        // the run may have written (its private /tmp, new for the run, always).
        let mut roots: Vec<std::path::PathBuf> = Vec::new();
        roots.push(
            v.paths
                .workspace
                .clone()
                .unwrap_or_else(|| here.to_path_buf()),
        );
        roots.extend(v.paths.writable.iter().cloned());
        let mut roots = roots_to_search(roots, writes);
        roots.extend(
            layer
                .and_then(|l| l.tmp.as_ref())
                .map(|t| t.path().to_path_buf()),
        );
        if let Some(f) = file_at_limit(&roots, fsize, writes.since) {
            hits.push((
                Hit::Fsize,
                format!(" of {fsize} bytes ({} is that long)", f.display()),
                fsize_field,
            ));
        }
    }
    hits.into_iter()
        .map(|(hit, detail, field)| {
            warnings.push(warning(hit, &detail, field));
            hit.name().to_string()
        })
        .collect()
}

/// Where the Landlock protections a run lacks went: the kernel's, or (EPERM from the version
/// query under a seccomp filter) the filter of a sandbox this process runs inside, whose
/// profile then needs the three calls; a nested run is otherwise told to upgrade its kernel.
fn landlock_missing_where() -> &'static str {
    let filtered = crate::sys::seccomp_mode().map_or(true, |m| m != 0);
    match crate::sys::landlock_abi() {
        Err(libc::EPERM) if filtered => {
            "here: landlock_create_ruleset is refused by the seccomp filter this process runs \
             under (a sandbox around this one; its profile needs --allow \
             landlock_create_ruleset:landlock_add_rule:landlock_restrict_self)"
        }
        _ => "on this kernel",
    }
}
