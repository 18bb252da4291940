//! The `sandbox` command line: its subcommands and flags, as a clap definition.
//!
//! It lives in the library so that the release tooling can generate man pages and shell
//! completions from the same definition the binary parses; `main.rs` only dispatches.

// Doc comments here are the command's help text (clap reads them); fields that clap flattens
// or dispatches on carry none, and need none.
#![allow(missing_docs)]

mod args;
mod choices;
mod session;

pub use args::{layer_flag, EnvArgs, McpArgs, NetArgs, PathArgs, PolicyArgs};
pub use choices::{parse_action, parse_violation_action};
pub use session::{SessionCmd, SessionStartArgs};

use clap::{Parser, Subcommand};
use sandbox_policy::Action;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "sandbox",
    version = env!("SANDBOX_LONG_VERSION"),
    about = "Kernel-enforced confinement for the commands agents run"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

/// The arguments of `sandbox run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kill the program after this many seconds (exit status 124).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Say on stderr how the run was confined.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub env: EnvArgs,
    /// Run the program in this session (`sandbox session start`) instead of a sandbox of its
    /// own; the session's policy is fixed, so no policy flag may come with it.
    #[arg(
        long,
        value_name = "ID",
        conflicts_with_all = SESSION_CONFLICTS
    )]
    pub session: Option<String>,
    /// Memory of the program and everything it starts, as docker and podman take it: bytes,
    /// or with a unit (`512M`, `2G`; K, M, G, T in powers of 1024); at least 32 MiB. Kept by
    /// the job's cgroup, else the host's watchdog; none by default. With --session: the
    /// command's own, at most the session's, in a cgroup of its own below the session's.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,
    /// The processes and threads the program and everything it starts may have at once (1 to
    /// 65536; default 1024 where the machine can enforce it, and refused where it cannot when
    /// asked for). With --session: 1 to the session's, in a cgroup of its own below the
    /// session's.
    #[arg(long, value_name = "N")]
    pub processes: Option<u64>,
    /// The program and its arguments (after `--` when the program's name starts with `-`).
    // `trailing_var_arg` alone: everything from the program on is its own, but a flag-like
    // word before it is this command's, so a misspelt flag (`--profle`) is a usage error with
    // a suggestion instead of a program that is not found. `allow_hyphen_values` took it as
    // the program.
    #[arg(required = true, trailing_var_arg = true)]
    pub argv: Vec<String>,
}

/// A size as docker, podman and systemd-run take one: bytes, or a number with a unit (`K`,
/// `M`, `G`, `T`, powers of 1024, optionally followed by `B` or `iB`, any case): `512M`,
/// `2GiB`, `1048576`. Zero, fractions, other units and sizes past 2^63 bytes are refused with
/// what was read.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = text[digits.len()..].to_ascii_uppercase();
    let shift = match unit.as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "`{text}`: the unit must be K, M, G or T (powers of 1024), or none for bytes"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}`: a whole number of bytes, or one with a unit (512M)"))?;
    match n.checked_mul(1 << shift) {
        Some(0) => Err(format!("`{text}`: must be more than zero")),
        Some(b) if b <= i64::MAX as u64 => Ok(b),
        _ => Err(format!("`{text}`: too large")),
    }
}

/// The flags of `run` that `--session` refuses: every one that sets the policy or the
/// environment (the session's are fixed when it starts) and `--verbose` (the session's layers
/// are not reported per command). A test checks that no other flag of `run` is left out.
const SESSION_CONFLICTS: [&str; 26] = [
    "profile",
    "allow",
    "deny",
    "on_violation",
    "static_binary",
    "require_sandbox",
    "config",
    "allow_root",
    "verbose",
    "workspace",
    "allow_broad_workspace",
    "allow_write",
    "deny_read",
    "connect_ports",
    "landlock",
    "isolation",
    "read_only",
    "allow_unix_socket",
    "allow_control_file",
    "network",
    "allow_domain",
    "resolve",
    "allow_host_port",
    "set",
    "keep",
    "home",
];

/// Parses this process's command line. `sandbox run ...`, what an agent starts for every
/// command, is first parsed against a command holding the `run` subcommand alone: building
/// every subcommand's arguments was most of clap's cost, about a tenth of a one-shot run of
/// the engine (perf, docs/benchmarks.md). Whatever that short form does not accept (`--help`,
/// a mistake) is parsed again by the whole command, so help and errors read the same.
pub fn parse() -> Cli {
    use clap::Parser;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    short_form(&args).unwrap_or_else(|| Cli::parse_from(args))
}

/// `args` parsed against the `run` subcommand alone, when they are a `run` it accepts.
fn short_form(args: &[std::ffi::OsString]) -> Option<Cli> {
    use clap::{Args, FromArgMatches};
    if args.get(1).is_none_or(|a| a != "run") {
        return None;
    }
    let short = clap::Command::new("sandbox")
        .subcommand_required(true)
        .subcommand(RunArgs::augment_args(clap::Command::new("run")));
    let matches = short.try_get_matches_from(args).ok()?;
    Cli::from_arg_matches(&matches).ok()
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a program under the sandbox.
    Run(RunArgs),
    /// Print the variables that sandbox a program (for agents in other languages).
    ///
    /// What the preload route cannot stop: code that runs before the library's constructor
    /// (a program's `.preinit_array`, other preloaded or linked libraries' constructors),
    /// setuid and setgid programs (`su`, `sg`: the loader ignores LD_PRELOAD for them),
    /// statically linked programs, and daemons or background processes that outlive the
    /// command (nothing ends them), and what a command leaves in the repository (git hooks,
    /// `core.fsmonitor`) and agents' control files (`.claude/`, `.mcp.json`): nothing puts
    /// them back. System V IPC is refused (ENOSYS): the route has no IPC namespace. `sandbox
    /// run` and `sandbox exec` confine all of these with the outer filter and namespaces. The
    /// first `sandbox env` of each user says so on stderr, once; with a profile that writes,
    /// every call says the repository is not guarded, unless `--isolation off`.
    Env {
        #[command(flatten)]
        policy: PolicyArgs,
        #[command(flatten)]
        paths: PathArgs,
        /// Print a JSON object instead of shell `export KEY='value'` lines.
        #[arg(long)]
        json: bool,
        /// Leave out the one-time note on what the preload route cannot stop.
        #[arg(long)]
        quiet: bool,
    },
    /// Write libsandbox.so to a path (default: the per-user directory) and print the path.
    Extract {
        /// Where to write it.
        #[arg(long)]
        to: Option<PathBuf>,
    },
    /// Say what works on this machine and why, and what a default run gets here (it starts
    /// one): its tier and every layer's state. Fails when a default run would fail.
    Check {
        /// Print one JSON object: `ok`, `tier`, `checks` (status, name, detail), `run` (the
        /// trial run's result) and `error`.
        #[arg(long)]
        json: bool,
    },
    /// List the built-in profiles, or show one resolved.
    Profiles {
        #[command(subcommand)]
        what: Option<ProfilesCmd>,
    },
    /// Say what admission control decides for a program, and why.
    Inspect {
        /// The program (a path, or a name looked up in PATH).
        program: String,
    },
    /// Run one exec request read as JSON from stdin; print the result as JSON.
    Exec {
        /// Read the request as JSON (the only mode).
        #[arg(long, required = true)]
        json: bool,
    },
    /// Serve an MCP server on stdio whose tools run commands under the policy these flags fix
    /// (docs/mcp.md).
    Mcp(McpArgs),
    /// Serve exec requests as JSON lines (stdin or a unix socket) until EOF or SIGTERM.
    Serve {
        /// Requests run at once, 1 to 1024 (default: the number of CPUs).
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        max_concurrent: Option<String>,
        /// Listen on this unix socket (created 0600, own uid only) instead of stdin.
        #[arg(long, value_name = "PATH")]
        socket: Option<std::ffi::OsString>,
        /// Serve the Kubernetes agent-sandbox sandboxd interface instead: gRPC
        /// process.v1.ProcessService and REST /v1/files, /v1/health, /v1/metadata
        /// (docs/process-api.md; builds with the `process-api` feature).
        #[arg(long, conflicts_with = "socket")]
        process_api: bool,
        #[command(flatten)]
        api: crate::process_api::ProcessApiArgs,
    },
    /// Write a profile as OCI / Docker seccomp JSON (docs/containers.md).
    Export {
        /// The output format: oci (the runtime-spec `linux.seccomp` object Docker and
        /// Kubernetes read).
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// A built-in profile (minimal, network, write, no-exec, shell, shell-network,
        /// unrestricted; `sandbox profiles` describes them) or a profile file's path (default:
        /// minimal).
        #[arg(long, value_parser = choices::profile(), hide_possible_values = true)]
        profile: Option<String>,
        /// Extra allow-list entries (`a:b:@group`), as for `run`.
        #[arg(long)]
        allow: Option<String>,
        /// Extra deny-list entries, as for `run`.
        #[arg(long)]
        deny: Option<String>,
        /// The action for blocked calls: kill, trap, log, errno, errno:NAME.
        #[arg(long, value_parser = choices::action(), hide_possible_values = true)]
        on_violation: Option<Action>,
        /// The architecture the JSON is for: x86_64 or aarch64 (default: this machine's).
        #[arg(long)]
        arch: Option<String>,
        /// Write here (atomically) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Also allow what `sandbox` itself needs inside the container (the Landlock calls;
        /// namespace creation answered EPERM, so it runs in the contained tier).
        #[arg(long)]
        for_sandbox: bool,
    },
    /// Read OCI / Docker seccomp JSON into a profile file (the format `--profile FILE` reads).
    Import {
        /// The JSON file (Docker's `--security-opt seccomp=` file, or a bundle's
        /// `linux.seccomp` object).
        file: PathBuf,
        /// Write here (atomically) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Run a command once, recording every system call it and its descendants make, and
    /// write a profile that allows exactly those (docs/learn.md).
    Learn {
        /// Write the profile to this file (default: standard output; the command's standard
        /// output then goes to standard error).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Compare with this profile: the summary and the profile mark calls it refuses
        /// (built-in name or file; default: minimal).
        #[arg(long, value_name = "PROFILE", value_parser = choices::profile(), hide_possible_values = true)]
        base: Option<String>,
        /// Kill the command and everything it started after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// The program and its arguments (after `--` when the program's name starts with
        /// `-`); a flag-like word before the program is a usage error, as for `run`.
        #[arg(required = true, trailing_var_arg = true)]
        argv: Vec<String>,
    },
    /// Sessions: one sandbox, many commands, from a shell (docs/sessions.md).
    Session {
        #[command(subcommand)]
        what: SessionCmd,
    },
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions {
        /// The shell: bash, zsh or fish.
        shell: Shell,
    },
}

#[derive(Subcommand, Debug)]
pub enum ProfilesCmd {
    /// Show a profile's resolved syscall list.
    Show {
        /// Built-in name or profile file.
        #[arg(value_parser = choices::profile(), hide_possible_values = true)]
        name: String,
    },
    /// List the syscall groups.
    Groups,
    /// List the registry presets (`--allow-domain @pypi`) and their domains.
    Registries {
        /// Print JSON instead: an object of presets, each with `description` and `domains`.
        #[arg(long)]
        json: bool,
    },
    /// Print the control-file list: agents' and editors' files in a workspace that run
    /// commands when that tool next starts there; a command's changes to them are put back.
    ControlFiles,
    /// Print the credential list: the paths no confined command may read, for this user.
    Credentials {
        /// Print JSON instead: every entry as written, with its kind, reason, whether it is
        /// for root only, and the paths it resolves to here.
        #[arg(long)]
        json: bool,
    },
}

/// The formats `sandbox export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// OCI runtime-spec / Docker seccomp JSON.
    Oci,
}

/// The shells `sandbox completions` writes scripts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// GNU bash (bash-completion).
    Bash,
    /// zsh (a `_sandbox` function for `fpath`).
    Zsh,
    /// fish (a `sandbox.fish` file for `completions/`).
    Fish,
}

impl Shell {
    /// Every shell, in the order the release bundle lists them.
    pub const ALL: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

    /// The file name the shell looks for: `sandbox`, `_sandbox`, `sandbox.fish`.
    pub fn file_name(self) -> &'static str {
        match self {
            Shell::Bash => "sandbox",
            Shell::Zsh => "_sandbox",
            Shell::Fish => "sandbox.fish",
        }
    }
}

/// The completion script for `shell`, generated from this definition.
pub fn completions(shell: Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    use clap_complete::Shell as S;
    let mut cmd = Cli::command();
    let gen = match shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
    };
    clap_complete::generate(gen, &mut cmd, "sandbox", out);
}

#[cfg(test)]
mod tests {
    /// The short form of `run` parses what the whole command parses, into the same values,
    /// and leaves to it what it does not accept (help, mistakes, other subcommands).
    #[test]
    fn the_short_form_of_run_parses_as_the_whole_command_does() {
        use super::{short_form, Cli};
        use clap::Parser;
        let os = |v: &[&str]| -> Vec<std::ffi::OsString> { v.iter().map(Into::into).collect() };
        for v in [
            &["sandbox", "run", "--", "/bin/true"][..],
            &["sandbox", "run", "/bin/echo", "a", "--b", "-c"],
            &[
                "sandbox",
                "run",
                "--profile",
                "shell",
                "-v",
                "--timeout",
                "5",
                "sh",
                "-c",
                "x",
            ],
            &[
                "sandbox",
                "run",
                "--allow-write",
                "/tmp",
                "--network",
                "none",
                "--",
                "ls",
            ],
            &[
                "sandbox",
                "run",
                "--landlock",
                "off",
                "--isolation",
                "required",
                "--",
                "ls",
            ],
            &[
                "sandbox",
                "run",
                "--allow-domain",
                "a.org",
                "--allow-root",
                "--",
                "curl",
            ],
            &[
                "sandbox",
                "run",
                "--env",
                "A=b=c",
                "--keep-env",
                "TOKEN",
                "--workspace",
                "/srv/p",
                "--allow-broad-workspace",
                "--",
                "env",
            ],
        ] {
            let whole = format!("{:?}", Cli::try_parse_from(os(v)).expect("valid"));
            let short = short_form(&os(v)).map(|c| format!("{c:?}"));
            assert_eq!(short.as_deref(), Some(whole.as_str()), "{v:?}");
        }
        for v in [
            &["sandbox", "run", "--help"][..],
            &["sandbox", "run"],
            &["sandbox", "run", "--timeout", "soon", "--", "ls"],
            &["sandbox", "run", "--profile"],
            &["sandbox", "run", "--profle", "shell", "--", "ls"],
            &["sandbox", "exec", "--json"],
            &["sandbox", "--version"],
            &["sandbox"],
        ] {
            assert!(short_form(&os(v)).is_none(), "{v:?}");
        }
        // A flag-like word before the program is the command's: a misspelt one is an error of
        // the whole command too (exit 2 with a suggestion), not the program's name.
        let e = Cli::try_parse_from(os(&["sandbox", "run", "--profle", "shell", "--", "ls"]))
            .expect_err("a misspelt flag");
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
    }
    /// `run --session` refuses every flag of `run` but `--timeout`, `--memory` and
    /// `--processes` (each command's own limits, at most the session's): a command cannot
    /// widen, or change, the policy of its session.
    #[test]
    fn session_refuses_every_policy_flag_of_run() {
        use clap::{CommandFactory, Parser};
        let cmd = super::Cli::command();
        let run = cmd.find_subcommand("run").expect("run");
        for arg in run.get_arguments() {
            let id = arg.get_id().as_str();
            let allowed =
                ["session", "timeout", "memory", "processes", "argv", "help"].contains(&id);
            assert_eq!(
                super::SESSION_CONFLICTS.contains(&id),
                !allowed,
                "--{id}: listed in SESSION_CONFLICTS or allowed with --session"
            );
            if allowed {
                continue;
            }
            let long = format!("--{}", arg.get_long().expect("a long flag"));
            let mut v = vec!["sandbox", "run", "--session", "x", long.as_str()];
            if arg.get_action().takes_values() {
                // A value each flag parses, so that only the conflict is left to refuse.
                v.push(match id {
                    "on_violation" => "kill",
                    "static_binary" => "block",
                    "landlock" | "isolation" => "off",
                    "network" => "none",
                    "home" => "private",
                    "connect_ports" | "allow_host_port" => "80",
                    "set" => "A=b",
                    _ => "x",
                });
            }
            v.extend(["--", "true"]);
            let e = super::Cli::try_parse_from(&v).expect_err(&long);
            assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{v:?}");
        }
    }
    /// `--profile`'s help names every built-in profile.
    #[test]
    fn the_profile_help_names_every_built_in() {
        use clap::CommandFactory;
        let cmd = super::Cli::command();
        for sub in ["run", "export"] {
            let help = cmd
                .find_subcommand(sub)
                .and_then(|c| c.get_arguments().find(|a| a.get_id() == "profile"))
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let listed: Vec<&str> = help
                .split_once('(')
                .and_then(|(_, r)| r.split_once(';'))
                .map(|(l, _)| l.split(", ").collect())
                .unwrap_or_default();
            let built_in: Vec<&str> = crate::policy::profile::Profile::builtin_names().collect();
            assert_eq!(listed, built_in, "{sub} --profile: {help:?}");
        }
    }
}

/// What a `sandbox` process does, for [`prepare_process`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessKind {
    /// Only prints (`profiles`, `check`, `env`, ...).
    Prints,
    /// Runs programs (`run`, `exec`, `serve`).
    RunsPrograms,
}

/// Process-wide setup before a command: one that only prints gets SIGPIPE's default back, so it
/// ends quietly when its reader goes away (`| head`); one that runs programs becomes
/// non-dumpable, so its /proc files (holding what a program must not learn) are root's.
pub fn prepare_process(kind: ProcessKind) {
    match kind {
        ProcessKind::Prints => crate::sys::default_sigpipe(),
        // Failure leaves the process dumpable, as it was before this protection existed.
        ProcessKind::RunsPrograms => {
            let _ = crate::sys::set_not_dumpable();
        }
    }
}
