//! The `sandbox` command: run programs under the sandbox, print the variables for other
//! languages, extract the library, and explain what works here and why.

use sandbox_host::cli::{
    Cmd, EnvArgs, NetArgs, PathArgs, PolicyArgs, ProcessKind, ProfilesCmd, RunArgs,
};
use sandbox_host::config::ExecConfig;
use sandbox_host::exec::OnViolation;
use sandbox_host::run::{self, RunSettings, EXIT_SANDBOX};
use sandbox_host::{admission, extract, platform, Options, Sandbox};
use sandbox_policy::error::Source;
use sandbox_policy::profile::{Profile, ProfileError};
use sandbox_policy::Action;
use std::path::PathBuf;
use std::time::Duration;

/// Small allocations from one arena instead of musl's allocator, which unmaps freed memory at
/// once (see `Arena`): a one-shot run spends 0.34-0.55 ms less CPU.
#[global_allocator]
static ALLOCATOR: sandbox_host::Arena = sandbox_host::Arena;

/// Builds sandbox options from the config file (if any) and the command line.
fn options(p: &PolicyArgs) -> Result<(Options, Option<ExecConfig>), String> {
    let config = match &p.config {
        Some(path) => Some(ExecConfig::load(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let origin = p
        .config
        .as_ref()
        .map(|c| c.display().to_string())
        .unwrap_or_default();
    let mut opts = match &config {
        Some(c) if p.profile.is_none() => c.options(&origin).map_err(|e| e.to_string())?,
        _ => Options::new(Profile::builtin("minimal").map_err(|e| e.to_string())?),
    };
    let profile = match (&p.profile, &p.allow, &p.deny) {
        (Some(name), _, _) => Some(Profile::named_or_file(name).map_err(|e| e.to_string())?),
        (None, Some(_), _) | (None, _, Some(_)) if config.is_none() => Some(
            Profile::custom(p.allow.as_deref(), p.deny.as_deref()).map_err(|e| flag_reason(&e))?,
        ),
        _ => None,
    };
    if let Some(mut prof) = profile {
        if prof.name() != "custom" {
            extend(&mut prof, p)?;
        }
        opts.profile = prof;
    } else if config.is_some() {
        extend(&mut opts.profile, p)?;
    }
    if p.on_violation.is_some() {
        opts.on_violation = p.on_violation;
    }
    if let Some(s) = p.static_binary {
        opts.static_binary = s;
    }
    opts.require_sandbox |= p.require_sandbox;
    Ok((opts, config))
}

/// A run's timeout in seconds, within the bounds of an exec request's `timeout_s` (0 would
/// kill the program at once; more than a day is taken for a mistake).
fn checked_timeout(what: &str, t: u64) -> Result<Duration, String> {
    let max = sandbox_host::exec::MAX_TIMEOUT_S as u64;
    if !(1..=max).contains(&t) {
        return Err(format!(
            "{what}: must be between 1 and {max} seconds, got {t}"
        ));
    }
    Ok(Duration::from_secs(t))
}

/// Adds `--allow` / `--deny` entries to a named profile, re-validating it.
fn extend(prof: &mut Profile, p: &PolicyArgs) -> Result<(), String> {
    if p.allow.is_none() && p.deny.is_none() {
        return Ok(());
    }
    let mut allow = prof.allow().map(<[String]>::to_vec);
    if let Some(a) = &p.allow {
        match &mut allow {
            Some(list) => list.extend(a.split(':').filter(|e| !e.is_empty()).map(String::from)),
            None => {
                return Err(format!(
                    "profile {} has no allow list to extend with --allow",
                    prof.name()
                ))
            }
        }
    }
    let mut deny = prof.deny().to_vec();
    if let Some(d) = &p.deny {
        deny.extend(d.split(':').filter(|e| !e.is_empty()).map(String::from));
    }
    let toml_list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut text = format!(
        "description = {:?}\ndefault_action = {:?}\n",
        prof.description(),
        prof.default_action().to_string()
    );
    if let Some(a) = &allow {
        text += &format!("allow = {}\n", toml_list(a));
    }
    text += &format!("deny = {}\n", toml_list(&deny));
    *prof = Profile::from_toml(prof.name(), &text).map_err(|e| flag_reason(&e))?;
    Ok(())
}

/// A profile error worded for the command line: an entry of `--allow` / `--deny` is named by
/// its flag, not by the environment variable the lists are checked under.
fn flag_reason(e: &ProfileError) -> String {
    match e.list_entry() {
        Some((Source::Allow, what)) => format!("--allow {what}"),
        Some((_, what)) => format!("--deny {what}"),
        None => e.to_string(),
    }
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    sandbox_host::escape::eprint_line(format_args!("sandbox: {msg}"));
    EXIT_SANDBOX
}

fn main() {
    // A session's resident process (module `session`): nothing else of the command runs.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == sandbox_host::session::resident::ARG)
    {
        sandbox_host::session::resident::main();
    }
    // A session's daemon (`sandbox session start` starts it): nothing else of the command runs.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == sandbox_host::session::daemon::ARG)
    {
        sandbox_host::session::daemon::main();
    }
    // The audit log is off unless asked for; then no subscriber is needed at all, and
    // building one (an env filter, a registry) is a measurable part of a one-shot run.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("SANDBOX_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            // Escaped like every stderr line: fields carry paths and names of the job.
            .with_writer(|| sandbox_host::escape::Stderr)
            .with_ansi(false)
            .init();
    }
    let cli = sandbox_host::cli::parse();
    if matches!(
        cli.command,
        Cmd::Run(RunArgs {
            session: Some(_),
            ..
        })
    ) {
        // A client of a session's daemon stays dumpable: the daemon reads its /proc files to
        // tell it from a sandboxed command, which uid 65534 cannot do for a non-dumpable
        // process (they are root's), and it holds nothing a program must not learn. SIGPIPE
        // stays ignored, as for `run`.
    } else if !matches!(
        cli.command,
        Cmd::Run(_) | Cmd::Exec { .. } | Cmd::Serve { .. } | Cmd::Mcp(_)
    ) {
        // Commands that only print end quietly when their reader goes away (`| head`), like
        // other command-line tools. `run` and `exec` keep ignoring SIGPIPE: exec writes a
        // request's stdin to a child that may close it.
        sandbox_host::cli::prepare_process(ProcessKind::Prints);
        // `check` starts a default run, from a host prepared as `run`'s is.
        if matches!(cli.command, Cmd::Check { .. }) {
            sandbox_host::cli::prepare_process(ProcessKind::RunsPrograms);
        }
    } else {
        // The commands that run programs hold what a program must not learn (the address of
        // the exempted execve, a spawner's secret) and could be attacked through
        // /proc/<pid>/mem where Yama allows same-uid access: a non-dumpable process's /proc
        // files are root's, so only a privileged program can open them (docs/security.md).
        sandbox_host::cli::prepare_process(ProcessKind::RunsPrograms);
    }
    std::process::exit(match cli.command {
        Cmd::Run(RunArgs {
            policy,
            timeout,
            verbose,
            paths,
            net,
            env,
            session,
            memory,
            processes,
            argv,
        }) => match session {
            // clap refuses policy flags with --session (a command cannot widen its session);
            // --memory and --processes are the command's own limits either way.
            Some(id) => sandbox_host::session::client::run(
                &id,
                &argv,
                timeout,
                sandbox_host::session::client::Own { memory, processes },
            ),
            None => {
                sandbox_host::exec::sole_request();
                let limits = sandbox_host::session::client::Own { memory, processes };
                cmd_run(&policy, &paths, &net, &env, timeout, verbose, limits, &argv)
            }
        },
        Cmd::Env {
            policy,
            paths,
            json,
            quiet,
        } => cmd_env(&policy, &paths, json, quiet),
        Cmd::Extract { to } => cmd_extract(to),
        Cmd::Check { json } => cmd_check(json),
        Cmd::Profiles { what } => cmd_profiles(what),
        Cmd::Inspect { program } => cmd_inspect(&program),
        Cmd::Exec { json: _ } => {
            sandbox_host::exec::sole_request();
            cmd_exec()
        }
        Cmd::Learn {
            out,
            base,
            timeout,
            argv,
        } => cmd_learn(out, base.as_deref(), timeout, &argv),
        Cmd::Serve {
            max_concurrent,
            socket,
            process_api,
            api,
        } => match (process_api, api.any()) {
            (true, _) => cmd_process_api(max_concurrent.as_deref(), &api),
            (false, true) => fail(
                "sandbox serve: --grpc-listen, --rest-listen, --api-workspace, --api-profile, \
                 --api-policy and --metadata-env-prefix are options of --process-api; add it",
            ),
            (false, false) => cmd_serve(max_concurrent.as_deref(), socket),
        },
        Cmd::Mcp(args) => match sandbox_host::mcp::serve(&args) {
            Ok(()) => 0,
            Err(e) => fail(format_args!("mcp: {e}")),
        },
        Cmd::Export {
            format: _,
            profile,
            allow,
            deny,
            on_violation,
            arch,
            out,
            for_sandbox,
        } => {
            let policy = PolicyArgs {
                profile,
                allow,
                deny,
                ..PolicyArgs::default()
            };
            let arch = arch.as_deref();
            cmd_export(&policy, on_violation, arch, out.as_deref(), for_sandbox)
        }
        Cmd::Import { file, out } => cmd_import(&file, out.as_deref()),
        Cmd::Session { what } => cmd_session(what),
        Cmd::Completions { shell } => {
            sandbox_host::cli::completions(shell, &mut std::io::stdout().lock());
            0
        }
    })
}

/// `sandbox session start|end|list` (module `session::client`).
fn cmd_session(what: sandbox_host::cli::SessionCmd) -> i32 {
    use sandbox_host::cli::SessionCmd;
    use sandbox_host::session::client;
    match what {
        // The daemon parses the flags again from the same words: everything after `start`.
        SessionCmd::Start(_) => {
            let flags: Vec<std::ffi::OsString> = std::env::args_os().skip(3).collect();
            client::start(&flags)
        }
        SessionCmd::End { id } => client::end(&id),
        SessionCmd::List { json } => client::list(json),
    }
}

#[allow(clippy::too_many_arguments)]
fn cmd_run(
    policy: &PolicyArgs,
    paths: &PathArgs,
    net: &NetArgs,
    env_args: &EnvArgs,
    timeout: Option<u64>,
    verbose: bool,
    limits: sandbox_host::session::client::Own,
    argv: &[String],
) -> i32 {
    let env = match run::environment(&env_args.keep, &env_args.set) {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    let home = env_args.home;
    match run_setup(policy, paths, net, timeout, verbose, env) {
        Ok((sandbox, mut settings)) => {
            settings.memory = limits.memory;
            settings.processes = limits.processes;
            if let Err(e) = settings.rlimits() {
                return fail(e);
            }
            if let Some(mode) = home {
                if let Err(e) = run::with_home(&mut settings, mode, env_args) {
                    return fail(e);
                }
            }
            run::run(&sandbox, &argv[0], &argv[1..], &settings)
        }
        Err(e) => fail(e),
    }
}

/// The sandbox and settings `sandbox run` uses for these flags (`sandbox check` builds a
/// default run's from no flags); `Err`: the flags' refusal.
fn run_setup(
    policy: &PolicyArgs,
    paths: &PathArgs,
    net: &NetArgs,
    timeout: Option<u64>,
    verbose: bool,
    env: Vec<(String, String)>,
) -> Result<(Sandbox, RunSettings), String> {
    let (mut opts, config) = options(policy).map_err(|e| e.to_string())?;
    // Refused calls reach the supervisor (the filter's `trap` becomes a notification), which
    // counts them and then fails the call with an errno (report, the default) or ends the
    // program with SIGSYS and names the call (kill, trap). `log` lets calls through, logged.
    let (on_violation, deny_errno) = match opts.on_violation {
        None | Some(Action::Errno(0)) => (OnViolation::Report, None),
        Some(Action::Errno(e)) => (OnViolation::Report, Some(e)),
        Some(Action::Kill) | Some(Action::Trap) => (OnViolation::Kill, None),
        Some(Action::Log) | Some(Action::Allow) => (OnViolation::Report, None),
    };
    if !matches!(opts.on_violation, Some(Action::Log)) {
        opts.on_violation = Some(Action::Trap);
    }
    let timeout = match (timeout, config.as_ref().and_then(|c| c.timeout)) {
        (Some(t), _) => Some(checked_timeout("--timeout", t)?),
        (None, Some(t)) => Some(checked_timeout("the configuration's timeout", t)?),
        (None, None) => None,
    };
    let paths = paths.rules().map_err(|e| e.to_string())?;
    opts.profile = paths.guard(opts.profile).map_err(|e| e.to_string())?;
    let network = net.network().map_err(|e| e.to_string())?;
    opts.profile = network
        .guard(opts.profile, platform::delegable())
        .map_err(|e| e.to_string())?;
    let sandbox = Sandbox::new(opts).map_err(|e| e.to_string())?;
    let settings = RunSettings {
        config,
        timeout,
        verbose,
        paths,
        on_violation,
        deny_errno,
        network,
        env,
        root_warning: platform::running_as_root() && !policy.allow_root,
        home: None,
        memory: None,
        processes: None,
    };
    Ok((sandbox, settings))
}

fn cmd_env(policy: &PolicyArgs, paths: &PathArgs, json: bool, quiet: bool) -> i32 {
    // Programs started with these variables get no namespaces: what only they provide cannot
    // be promised here, so it is refused rather than left out.
    if !paths.read_only.is_empty() {
        return fail("--read-only: needs the namespace layer, which `sandbox env` cannot give (use sandbox run)");
    }
    if paths.isolation == Some(sandbox_host::exec::isolation::Mode::Required) {
        return fail(
            "--isolation required: `sandbox env` cannot give namespaces (use sandbox run)",
        );
    }
    let (mut opts, _) = match options(policy) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let rules = match paths.rules() {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    opts.profile = match rules.guard(opts.profile) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    // No IPC namespace on this route: the System V IPC calls are refused unless the profile
    // names them (module `sysv_ipc`).
    opts.profile = match sandbox_host::sysv_ipc::refuse(opts.profile) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    // The preload has no supervisor to report to: `report` is the profile's own action.
    if opts.on_violation == Some(Action::Errno(0)) {
        opts.on_violation = None;
    }
    let sandbox = match Sandbox::new(opts) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return fail(format_args!("working directory: {e}")),
    };
    let layer = match sandbox_host::exec::preload_layer(&rules, &sandbox, &cwd) {
        Ok(l) => l,
        Err(r) => return fail(paths.flag_message(&r)),
    };
    // The library goes where none of the commands may write, before `env` hands out its path:
    // one that could be rewritten would run the later commands unconfined.
    if let Some(layer) = &layer {
        if let Err(e) = sandbox.preload_outside(&layer.writable) {
            return fail(preload_placement(&e, layer, &rules, paths));
        }
    }
    let mut vars = match sandbox.env() {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    match layer {
        None => {}
        Some(layer) => {
            if !vars.iter().any(|(k, _)| *k == "LD_PRELOAD") {
                match sandbox.preload_path() {
                    Some(p) => vars.insert(0, ("LD_PRELOAD", p.display().to_string())),
                    None => {
                        return fail(
                            "libsandbox.so is not available here, so the Landlock layer cannot \
                             be applied through it (--landlock off to print the filter alone)",
                        )
                    }
                }
            }
            if let Some(w) = &layer.warning {
                eprintln!("{w}");
            }
            vars.push(("SANDBOX_LANDLOCK", layer.value));
            vars.push(("TMPDIR", layer.tmpdir.display().to_string()));
        }
    }
    if !quiet && sandbox_host::preload_notice::due() {
        eprintln!("{}", sandbox_host::preload_notice::LINE);
    }
    // What `--isolation preferred` (the default) promises and this route cannot give, said on
    // every call where the commands may write: `--isolation off` says it is known.
    if paths.isolation != Some(sandbox_host::exec::isolation::Mode::Off)
        && sandbox_host::exec::preload_layer_writes(&sandbox)
    {
        eprintln!("{}", sandbox_host::preload_notice::UNGUARDED);
    }
    if json {
        let map: serde_json::Map<String, serde_json::Value> = vars
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
            .collect();
        println!("{}", serde_json::Value::Object(map));
    } else {
        // One `export KEY='value'` per variable, quoted for a POSIX shell: values carry spaces,
        // parentheses and `|` (argument rules), and `SANDBOX_LANDLOCK` spans several lines
        // inside its quotes. `eval "$(sandbox env)"` then sets and exports them exactly;
        // `export` because an unexported variable never reaches a program.
        for (k, v) in vars {
            println!("export {k}='{}'", v.replace('\'', "'\\''"));
        }
    }
    0
}

/// Why the preload could not be placed outside the places the commands may write, worded
/// with the flag that made the place writable when that is the reason.
fn preload_placement(
    e: &sandbox_host::SandboxError,
    layer: &sandbox_host::exec::PreloadLayer,
    rules: &sandbox_host::exec::PathRules,
    paths: &PathArgs,
) -> String {
    use sandbox_host::extract::ExtractError;
    let (place, reason) = match e {
        // A library provided before (libsandboxPath): it cannot be moved.
        sandbox_host::SandboxError::Extract(ExtractError::InsideWritable { path, place }) => (
            place.as_path(),
            format!(
                "the preload library {} is inside {}, which the commands may write: one could \
                 replace the library the later ones load; give a narrower place, or put the \
                 library elsewhere (libsandboxPath)",
                path.display(),
                place.display()
            ),
        ),
        sandbox_host::SandboxError::Extract(x) => match x.writable_place() {
            Some(place) => (
                place,
                format!(
                    "{} holds every directory the preload library could go to ({x}); give a \
                     narrower place, or set XDG_RUNTIME_DIR to a private directory outside it",
                    place.display()
                ),
            ),
            None => return x.to_string(),
        },
        other => return other.to_string(),
    };
    paths.flag_message(&sandbox_host::exec::Refusal::new(
        layer.field_of(rules, place),
        reason,
    ))
}

fn cmd_extract(to: Option<PathBuf>) -> i32 {
    let result = match &to {
        Some(p) => extract::extract_to(p).map(|()| p.clone()),
        None => extract::extracted(),
    };
    match result {
        Ok(p) => {
            println!("{}", p.display());
            0
        }
        Err(e) => fail(e),
    }
}

fn cmd_check(json: bool) -> i32 {
    use sandbox_host::check::{self, Line};
    let mut ok = true;
    let mut lines = Vec::new();
    for c in platform::report() {
        lines.push(match &c.result {
            Ok(detail) => Line::new("ok", c.name, detail.clone()),
            Err(why) => {
                ok &= !c.required;
                Line::new(
                    if c.required { "fail" } else { "warn" },
                    c.name,
                    why.clone(),
                )
            }
        });
    }
    // Namespaces are optional (`--isolation preferred` runs without them and says so).
    for line in sandbox_host::exec::isolation::preflight() {
        let status = if line.ends_with(": yes") {
            "ok"
        } else {
            "warn"
        };
        lines.push(Line::new(status, "isolation", line));
    }
    match extract::extracted() {
        Ok(p) => lines.push(Line::new("ok", "preload", p.display().to_string())),
        Err(e) => {
            ok = false;
            lines.push(Line::new("fail", "preload", e.to_string()));
        }
    }
    // What a default run gets: `sandbox run -- true`, parsed as the command line would be.
    let trial = match <sandbox_host::cli::Cli as clap::Parser>::try_parse_from([
        "sandbox", "run", "--", "true",
    ]) {
        Ok(sandbox_host::cli::Cli {
            command: Cmd::Run(a),
        }) => run::environment(&a.env.keep, &a.env.set)
            .and_then(|env| run_setup(&a.policy, &a.paths, &a.net, a.timeout, false, env))
            .and_then(|(sandbox, settings)| run::trial(&sandbox, "true", &settings)),
        other => Err(format!("the default run's flags did not parse: {other:?}")),
    };
    let trial_lines = check::trial_lines(&trial);
    ok &= trial_lines.iter().all(|l| l.status != "fail");
    lines.extend(trial_lines);
    if json {
        println!("{}", check::json(ok, &lines, &trial));
    } else {
        check::print(&lines);
    }
    if ok {
        0
    } else {
        1
    }
}

fn cmd_profiles(what: Option<ProfilesCmd>) -> i32 {
    match what {
        None => {
            for name in Profile::builtin_names() {
                match Profile::builtin(name) {
                    Ok(p) => println!("{name:13} {}", p.description()),
                    Err(e) => return fail(e),
                }
            }
            0
        }
        Some(ProfilesCmd::Groups) => {
            for g in sandbox_policy::groups::all() {
                println!("@{:10} {}", g.name, g.doc);
            }
            0
        }
        Some(ProfilesCmd::Credentials { json }) => cmd_credentials(json),
        Some(ProfilesCmd::ControlFiles) => {
            for e in sandbox_host::control_files::all() {
                println!("{:24} {:12} {}", e.path, e.tool, e.reason);
            }
            0
        }
        Some(ProfilesCmd::Registries { json }) => cmd_registries(json),
        Some(ProfilesCmd::Show { name }) => {
            let p = match Profile::named_or_file(&name) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            println!("# {}: {}", p.name(), p.description());
            if p.is_unrestricted() {
                println!("# no filter");
                return 0;
            }
            println!("# default action: {}", p.default_action());
            for (syscall, decision, source) in p.resolve_with_groups(sandbox_policy::NATIVE) {
                println!("{syscall:24} {decision:40} {source}");
            }
            0
        }
    }
}

/// `sandbox profiles credentials`: the resolved paths one per line, or every entry as JSON.
/// `sandbox profiles registries`: the presets `--allow-domain @NAME` expands.
fn cmd_registries(json: bool) -> i32 {
    let all = sandbox_host::proxy::presets::all();
    if json {
        let v: serde_json::Map<String, serde_json::Value> = all
            .iter()
            .map(|(k, p)| {
                let v = serde_json::json!({"description": p.description, "domains": p.domains});
                (k.clone(), v)
            })
            .collect();
        println!("{}", serde_json::Value::Object(v));
        return 0;
    }
    for (name, p) in all {
        println!("@{name:9} {}", p.domains.join(" "));
        println!("           {}", p.description);
    }
    0
}

fn cmd_credentials(json: bool) -> i32 {
    use sandbox_host::credentials::{self, Context};
    let ctx = Context::current();
    let paths = credentials::deny_read(&ctx);
    // One path per line cannot hold a newline; the runners refuse such a path too.
    if let Some(bad) = paths
        .iter()
        .find(|p| p.as_os_str().as_encoded_bytes().contains(&b'\n'))
    {
        return fail(format_args!(
            "profiles credentials: {bad:?} holds a newline (from HOME or XDG_RUNTIME_DIR), \
             which no command may run with; set them to paths without one"
        ));
    }
    if !json {
        for p in paths {
            println!("{}", p.display());
        }
        return 0;
    }
    let entries: Vec<serde_json::Value> = credentials::list()
        .iter()
        .map(|e| {
            let resolved: Vec<String> = credentials::resolve(e, &ctx)
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            serde_json::json!({
                "kind": e.kind,
                "path": e.path,
                "reason": e.reason,
                "root_only": e.root_only,
                "resolved": resolved,
            })
        })
        .collect();
    println!("{}", serde_json::Value::Array(entries));
    0
}

fn cmd_inspect(program: &str) -> i32 {
    let path = match admission::resolve(program, std::env::var("PATH").ok().as_deref()) {
        Ok(p) => p,
        Err(e) => {
            sandbox_host::escape::eprint_line(format_args!("sandbox: {e}"));
            return e.exit_status();
        }
    };
    let v = admission::classify(&path);
    match &v.preload {
        Ok(()) => println!(
            "{}: dynamic glibc program: the preload confines it",
            path.display()
        ),
        Err(why) => println!(
            "{}: cannot be confined by the preload: {why}",
            path.display()
        ),
    }
    if v.privileged {
        println!("{}: setuid/setgid/capabilities: runs with no_new_privs (unprivileged) under the sandbox", path.display());
    }
    0
}

fn cmd_exec() -> i32 {
    use std::io::{Read, Write};
    let mut input = Vec::new();
    let limit = sandbox_host::exec::json::MAX_REQUEST_BYTES as u64 + 1;
    if let Err(e) = std::io::stdin().take(limit).read_to_end(&mut input) {
        return fail(format_args!("reading stdin: {e}"));
    }
    let (out, code) = sandbox_host::exec::json::run_json(&input);
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
    code
}

fn cmd_export(
    policy: &PolicyArgs,
    action: Option<Action>,
    arch: Option<&str>,
    out: Option<&std::path::Path>,
    for_sandbox: bool,
) -> i32 {
    use sandbox_host::interchange;
    let result = (|| {
        let arch = interchange::arch(arch)?;
        let (opts, _) = options(policy)?;
        let (profile, mut notes) =
            interchange::for_container(&opts.profile, arch, action, for_sandbox)?;
        let export = interchange::export(&profile, arch, action)?;
        interchange::write_out(out, &export.json)?;
        notes.extend(export.notes);
        Ok::<_, String>(notes)
    })();
    match result {
        Ok(notes) => {
            // What the JSON cannot say is said on every export, like any other degradation.
            for n in notes {
                sandbox_host::escape::eprint_line(format_args!("sandbox: export: {n}"));
            }
            0
        }
        Err(e) => fail(format_args!("export: {e}")),
    }
}

fn cmd_import(file: &std::path::Path, out: Option<&std::path::Path>) -> i32 {
    use sandbox_host::interchange;
    match interchange::import(file).and_then(|i| interchange::write_out(out, &i.toml)) {
        Ok(()) => 0,
        Err(e) => fail(format_args!("import: {e}")),
    }
}

fn cmd_learn(
    out: Option<PathBuf>,
    base: Option<&str>,
    timeout: Option<u64>,
    argv: &[String],
) -> i32 {
    use sandbox_host::learn;
    use std::io::{IsTerminal, Write};
    let base = match Profile::named_or_file(base.unwrap_or("minimal")) {
        Ok(p) => p,
        Err(e) => return fail(format_args!("--base: {e}")),
    };
    if let Some(Err(e)) = timeout.map(|t| checked_timeout("--timeout", t)) {
        return fail(e);
    }
    // Where the profile goes is checked before anything runs.
    let target = match &out {
        Some(path) => match learn::OutFile::check(path) {
            Ok(t) => Some(t),
            Err(e) => return fail(format_args!("--out {}: {e}", path.display())),
        },
        None => None,
    };
    // Without --out the profile is the only thing on standard output: the command's output
    // goes to standard error.
    let stdout = match &target {
        Some(_) => None,
        None => match learn::stdout_to_stderr() {
            Ok(f) => Some(f),
            Err(e) => return fail(format_args!("redirecting the command's output: {e}")),
        },
    };
    let settings = learn::LearnSettings {
        base: base.clone(),
        timeout: timeout.map(Duration::from_secs),
        progress: std::io::stderr().is_terminal(),
    };
    let learned = match learn::learn(&argv[0], &argv[1..], &settings) {
        Ok(l) => l,
        Err(e) => {
            sandbox_host::escape::eprint_line(format_args!("sandbox: {e}"));
            return e.status;
        }
    };
    let command = learn::shell_line(argv);
    let text = learn::profile_text(&learned.recording, &command, base.name());
    let r = &learned.result;
    let ended = if r.timed_out {
        format!(
            "timed out after {} s and was killed",
            timeout.unwrap_or_default()
        )
    } else {
        match (r.exit_code, r.signal) {
            (Some(c), _) => format!("exited with status {c}"),
            (_, Some(s)) => format!("was killed by signal {s}"),
            _ => "ended".to_string(),
        }
    };
    sandbox_host::escape::eprint_line(format_args!(
        "sandbox learn: {} {ended} after {:.2} s; what it and its descendants called:",
        sandbox_host::escape::path(&learned.program),
        r.duration_s
    ));
    // The summary names paths and programs of the job: each of its lines escaped.
    for l in learn::summary(&learned.recording, base.name()).lines() {
        sandbox_host::escape::eprint_line(l);
    }
    let written = match (&target, stdout) {
        (Some(t), _) => t.write(&text).map(|()| {
            sandbox_host::escape::eprint_line(format_args!(
                "sandbox learn: profile written to {}",
                sandbox_host::escape::path(t.path())
            ));
        }),
        (None, Some(mut f)) => f.write_all(text.as_bytes()),
        (None, None) => unreachable!("standard output is kept when there is no --out"),
    };
    if let Err(e) = written {
        return fail(format_args!("writing the profile: {e}"));
    }
    learned.exit_status()
}

fn cmd_serve(max_concurrent: Option<&str>, socket: Option<std::ffi::OsString>) -> i32 {
    use sandbox_host::serve;
    let mut opts = serve::ServeOptions::new();
    if let Some(n) = max_concurrent {
        match serve::parse_max_concurrent(n) {
            Ok(n) => opts.max_concurrent = n,
            Err(e) => return fail(e),
        }
    }
    opts.socket = socket.map(PathBuf::from);
    match serve::serve(&opts) {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

/// `sandbox serve --process-api` (docs/process-api.md).
#[cfg(feature = "process-api")]
fn cmd_process_api(
    max_concurrent: Option<&str>,
    api: &sandbox_host::process_api::ProcessApiArgs,
) -> i32 {
    let max_concurrent = match max_concurrent.map(sandbox_host::serve::parse_max_concurrent) {
        None => sandbox_host::serve::default_concurrency(),
        Some(Ok(n)) => n,
        Some(Err(e)) => return fail(e),
    };
    let config = match api.config() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let run = sandbox_host::exec::RunOptions::default();
    match sandbox_host::process_api::serve(config, run, max_concurrent) {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

/// `sandbox serve --process-api` in a build without the feature: refused, naming the build.
#[cfg(not(feature = "process-api"))]
fn cmd_process_api(
    _max_concurrent: Option<&str>,
    _api: &sandbox_host::process_api::ProcessApiArgs,
) -> i32 {
    fail(
        "sandbox serve --process-api: this build has no process API; build it with \
         `cargo build --features sandbox-host/process-api`",
    )
}
