//! The flag groups several subcommands share (`run`, `mcp`, `session start`, `exec`): the
//! policy, paths, network and environment flags, and `sandbox mcp`'s whole set.

use super::choices;
use crate::StaticBinaryAction;
use sandbox_policy::Action;
use std::path::PathBuf;

/// Options that select and adjust the policy.
#[derive(clap::Args, Clone, Default, Debug)]
pub struct PolicyArgs {
    /// A built-in profile (minimal, network, write, no-exec, shell, shell-network,
    /// unrestricted; `sandbox profiles` describes them) or a profile file's path (default:
    /// minimal).
    #[arg(long, value_parser = choices::profile(), hide_possible_values = true)]
    pub profile: Option<String>,
    /// Extra allow-list entries (`a:b:@group`); alone, they form a custom allow list.
    #[arg(long)]
    pub allow: Option<String>,
    /// Extra deny-list entries; alone, they form a custom deny list.
    #[arg(long)]
    pub deny: Option<String>,
    /// What a blocked syscall does: report (default: it fails with EPERM, or the profile's
    /// errno, the program goes on, and each refused call is listed), kill (ended by SIGSYS,
    /// the call named), errno:NAME (report with that errno), trap, log.
    #[arg(long, value_parser = choices::violation_action(), hide_possible_values = true)]
    pub on_violation: Option<Action>,
    /// Programs a preload cannot enter: block, warn, allow or confine.
    #[arg(long, value_parser = choices::static_binary(), hide_possible_values = true)]
    pub static_binary: Option<StaticBinaryAction>,
    /// Refuse to run when the sandbox is unavailable on this machine.
    #[arg(long)]
    pub require_sandbox: bool,
    /// A GoClaw `tools.exec` JSON config; command-line options override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run as root without the warning `sandbox run` prints on every such run.
    #[arg(long)]
    pub allow_root: bool,
}

/// The Landlock layer: what the program may write and read (docs/paths.md).
#[derive(clap::Args, Clone, Default, Debug)]
pub struct PathArgs {
    /// The directory the program may write beneath (default: the working directory for
    /// profiles that allow file changes; nothing for minimal and network).
    #[arg(long)]
    pub workspace: Option<String>,
    /// Let --workspace be `/`, the home directory, a parent of either or a directory holding
    /// credentials (refused otherwise); the run then says so on stderr.
    #[arg(long)]
    pub allow_broad_workspace: bool,
    /// Another path the program may write (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<String>,
    /// A path the program must not read, besides the default credential list (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<String>,
    /// With a profile that has network: the only TCP ports it may connect to (`80,443`).
    #[arg(long, value_delimiter = ',', value_name = "PORTS")]
    pub connect_ports: Option<Vec<u16>>,
    /// Landlock: required (refuse without it), preferred (default; say what is missing) or off.
    #[arg(long, value_name = "MODE", value_parser = choices::layer_mode(), hide_possible_values = true)]
    pub landlock: Option<crate::landlock::Mode>,
    /// Namespaces (own PID space and /proc, private /tmp, read-only .git/hooks, git
    /// configuration checked after the job): required, preferred (default; say when
    /// unavailable) or off.
    #[arg(long, value_name = "MODE", value_parser = choices::layer_mode(), hide_possible_values = true)]
    pub isolation: Option<crate::exec::isolation::Mode>,
    /// A path mounted read-only over itself (repeatable); one that does not exist must be in
    /// the workspace and cannot be created.
    #[arg(long = "read-only", value_name = "PATH")]
    pub read_only: Vec<String>,
    /// A host unix socket the command may connect to (repeatable): with namespaces, every
    /// other socket outside the workspace is hidden (tmux, ssh-agent, docker, D-Bus...).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub allow_unix_socket: Vec<String>,
    /// An agent's or editor's control file the command may change at the top of the
    /// workspace (repeatable; `sandbox profiles control-files` lists them: `.claude`,
    /// `.mcp.json`, `.envrc`...); the others are put back after the command.
    #[arg(long = "allow-control-file", value_name = "PATH")]
    pub allow_control_file: Vec<String>,
}

impl PathArgs {
    /// The rules, with errors naming the flag.
    pub fn rules(&self) -> Result<crate::exec::PathRules, String> {
        crate::exec::PathRules::new(
            self.landlock.unwrap_or_default(),
            self.workspace.as_deref(),
            &self.allow_write,
            &self.deny_read,
            self.connect_ports.as_deref(),
        )
        .and_then(|r| r.with_isolation(self.isolation.unwrap_or_default(), &self.read_only))
        .and_then(|r| r.with_unix_sockets(&self.allow_unix_socket))
        .and_then(|r| r.with_control_files(&self.allow_control_file))
        .and_then(|r| r.with_broad_workspace(self.allow_broad_workspace))
        .map_err(|r| self.flag_message(&r))
    }

    /// A refusal of the layer's fields, worded with the flag instead of the JSON field.
    pub fn flag_message(&self, r: &crate::exec::Refusal) -> String {
        // Some reasons start with the field's own name (`workspace: ...`): the flag replaces
        // it rather than preceding it.
        let own = format!("{}: ", r.field);
        let reason = r.reason.strip_prefix(&own).unwrap_or(&r.reason);
        format!("{}: {reason}", layer_flag(&r.field).unwrap_or("--landlock"))
    }
}

/// The flag that sets a path or isolation field of a request (`read_only_paths[1]` is
/// `--read-only`), so that a refusal of it reads in a command-line user's terms.
pub fn layer_flag(field: &str) -> Option<&'static str> {
    Some(match field.split('[').next().unwrap_or_default() {
        "workspace" => "--workspace",
        "allow_broad_workspace" => "--allow-broad-workspace",
        "writable_paths" => "--allow-write",
        "deny_read" => "--deny-read",
        "connect_ports" => "--connect-ports",
        "isolation" => "--isolation",
        "read_only_paths" => "--read-only",
        "allow_unix_sockets" => "--allow-unix-socket",
        "allow_control_files" => "--allow-control-file",
        "landlock" => "--landlock",
        _ => return None,
    })
}

/// The network: host, none, or only the allowlist proxy (docs/isolation.md).
#[derive(clap::Args, Clone, Default, Debug)]
pub struct NetArgs {
    /// host (the host's network), none (loopback only) or proxy (only the allowlist proxy);
    /// default: proxy with --allow-domain, none with only --allow-host-port, else by profile.
    #[arg(long, value_name = "MODE", value_parser = choices::network_mode(), hide_possible_values = true)]
    pub network: Option<crate::network::Mode>,
    /// A domain the proxy lets through; `*.example.com` covers its subdomains (repeatable).
    #[arg(long = "allow-domain", value_name = "NAME")]
    pub allow_domain: Vec<String>,
    /// Pin NAME on PORT to ADDR for the proxy, like curl's option (IPv6 in brackets:
    /// `[::1]`); an internal address is then allowed for that name on that port only. NAME:ADDR
    /// (every port) is accepted for public addresses only (repeatable).
    #[arg(long, value_name = "NAME:PORT:ADDR")]
    pub resolve: Vec<String>,
    /// Make the host's 127.0.0.1:PORT reachable as 127.0.0.1:PORT inside (repeatable).
    #[arg(long = "allow-host-port", value_name = "PORT")]
    pub allow_host_port: Vec<u16>,
}

impl NetArgs {
    /// The validated network request, with errors naming the flag.
    pub fn network(&self) -> Result<crate::network::Network, String> {
        let pins = crate::proxy::Pins::parse_list(&self.resolve).map_err(|(_, e)| {
            format!("--resolve: {e}; expected NAME:PORT:ADDR (api.example.com:8080:127.0.0.1)")
        })?;
        crate::network::Network::new(
            self.network,
            &self.allow_domain,
            pins,
            &self.allow_host_port,
            crate::proxy::Naming::Flags,
        )
        .map_err(|r| {
            let flag = match r.field.split(['[', '.']).next().unwrap_or_default() {
                "allow_domains" => "--allow-domain",
                "resolve" => "--resolve",
                "host_ports" => "--allow-host-port",
                _ => "--network",
            };
            format!("{flag}: {}", r.reason)
        })
    }
}

/// What of the environment reaches the program besides the safe list (docs/exec.md).
#[derive(clap::Args, Clone, Default, Debug)]
pub struct EnvArgs {
    /// Set NAME=VALUE in the program's environment (repeatable); variables that load code
    /// (LD_PRELOAD, BASH_ENV, GIT_CONFIG_*...) are refused.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Pass this variable of the caller's environment on (repeatable); refused as --env is.
    #[arg(long = "keep-env", value_name = "NAME")]
    pub keep: Vec<String>,
    /// The program's HOME: real (the caller's, read-only: the default of `run`); persistent
    /// (the sandbox home of the user and workspace, kept between commands, writable, with the package caches:
    /// the default of `session start` and `mcp`); private (HOME=/tmp, gone after the
    /// command). See docs/exec.md, "The job's home".
    #[arg(long = "home", value_name = "persistent|private|real")]
    pub home: Option<crate::exec::HomeMode>,
}

/// The arguments of `sandbox mcp`: `sandbox run`'s policy flags, fixed for the server's life
/// (module `mcp::policy` turns them into the exec request every tool call copies).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct McpArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kill each command after this many seconds (1 to 600; default 60). A tool call may ask
    /// for less, never more.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Memory of each command's whole job, in bytes (default 512 MiB; at least 32 MiB).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<u64>,
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub env: EnvArgs,
}
