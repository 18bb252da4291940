//! The arguments of `sandbox session` (docs/sessions.md, "From a shell").

use super::args::{EnvArgs, McpArgs, NetArgs, PathArgs, PolicyArgs};
use clap::Subcommand;

/// `sandbox session start|end|list`.
#[derive(Subcommand, Debug)]
pub enum SessionCmd {
    /// Start a session in a daemon of its own and print its id; `sandbox run --session ID`
    /// runs commands in it.
    Start(Box<SessionStartArgs>),
    /// End a session: every process in it is killed before this returns.
    End {
        /// The session's id, as `sandbox session start` printed it.
        id: String,
    },
    /// List this user's sessions: id, profile, workspace, age, commands running.
    List {
        /// Print a JSON array instead: one object per session.
        #[arg(long)]
        json: bool,
    },
}

/// The arguments of `sandbox session start`: `sandbox run`'s policy flags, fixed for the
/// session's life, and its idle time.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SessionStartArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kill each command after this many seconds (1 to 86400; default 86400: a day).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Memory of the whole session, in bytes (default 512 MiB; at least 32 MiB).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<u64>,
    /// End the session after this many seconds without a running command (1 to 86400;
    /// default 1800: half an hour).
    #[arg(long, value_name = "SECONDS")]
    pub idle: Option<u64>,
    #[command(flatten)]
    pub paths: PathArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub env: EnvArgs,
}

impl SessionStartArgs {
    /// The same flags as `sandbox mcp`'s, whose checks (module `mcp::policy`) turn them into
    /// the session's request.
    pub fn as_mcp(&self) -> McpArgs {
        McpArgs {
            policy: self.policy.clone(),
            timeout: self.timeout,
            memory: self.memory,
            paths: self.paths.clone(),
            net: self.net.clone(),
            env: self.env.clone(),
        }
    }
}
