//! The command-line options of `sandbox serve --process-api` and the policy they fix.
//!
//! Compiled with or without the `process-api` feature, so that the flags are always known to
//! the command line and a build without the feature refuses them by name instead of calling
//! them unknown.

use crate::exec::Request;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Default gRPC address: sandboxd's (`127.0.0.1:9090`).
pub const DEFAULT_GRPC: &str = "127.0.0.1:9090";
/// Default REST address: sandboxd's (`127.0.0.1:8080`).
pub const DEFAULT_REST: &str = "127.0.0.1:8080";
/// Default workspace: sandboxd's root (`/workspace`).
pub const DEFAULT_WORKSPACE: &str = "/workspace";
/// Default prefix of the variables `/v1/metadata` serves: sandboxd's.
pub const DEFAULT_METADATA_PREFIX: &str = "SANDBOX_";

/// Options of `sandbox serve` that only the process API reads (docs/process-api.md).
#[derive(clap::Args, Clone, Default, Debug, PartialEq)]
pub struct ProcessApiArgs {
    /// With --process-api: the gRPC ProcessService address (default 127.0.0.1:9090).
    #[arg(long, value_name = "ADDR")]
    pub grpc_listen: Option<String>,
    /// With --process-api: the REST address of /v1/files, /v1/health, /v1/metadata (default
    /// 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub rest_listen: Option<String>,
    /// With --process-api: the workspace (default /workspace): every command's writable
    /// directory and working directory, and the root of /v1/files.
    #[arg(long = "api-workspace", value_name = "DIR")]
    pub workspace: Option<String>,
    /// With --process-api: the built-in profile or profile file of every command (default:
    /// shell, what an agent's commands need).
    #[arg(long = "api-profile", value_name = "PROFILE")]
    pub profile: Option<String>,
    /// With --process-api: an exec request as JSON without `argv` (docs/exec.md): its fields
    /// (network, limits, paths...) are the policy of every command.
    #[arg(long = "api-policy", value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// With --process-api: the prefix of the server's variables /v1/metadata serves (default
    /// SANDBOX_); names that look like credentials are never served.
    #[arg(long, value_name = "PREFIX")]
    pub metadata_env_prefix: Option<String>,
}

/// Everything the process API needs, checked.
#[derive(Clone, Debug)]
pub struct ProcessApiConfig {
    /// Where the gRPC service listens.
    pub grpc: SocketAddr,
    /// Where the REST endpoints listen.
    pub rest: SocketAddr,
    /// The workspace, canonical.
    pub workspace: PathBuf,
    /// The policy of every command: a request whose `argv`, `cwd`, `env` each call fills in.
    pub policy: Request,
    /// The prefix of the variables `/v1/metadata` serves.
    pub metadata_prefix: String,
}

impl ProcessApiArgs {
    /// Whether any option was given (they mean nothing without `--process-api`).
    pub fn any(&self) -> bool {
        *self != ProcessApiArgs::default()
    }

    /// Checks the options; `Err` is one line naming the flag and what it must be.
    pub fn config(&self) -> Result<ProcessApiConfig, String> {
        let grpc = address("--grpc-listen", self.grpc_listen.as_deref(), DEFAULT_GRPC)?;
        let rest = address("--rest-listen", self.rest_listen.as_deref(), DEFAULT_REST)?;
        if grpc == rest {
            return Err(format!(
                "--rest-listen: the gRPC address {grpc} again; the two services need two \
                 addresses"
            ));
        }
        let given = self.workspace.as_deref().unwrap_or(DEFAULT_WORKSPACE);
        let workspace = workspace(given)?;
        let mut policy = match &self.policy {
            Some(file) => policy_file(file)?,
            None => Request::new(["/bin/true"]),
        };
        // A policy file's own workspace would make /v1/files and the commands disagree.
        if policy.workspace.is_some() {
            return Err(
                "--api-policy: `workspace` is set by --api-workspace, remove it from the file"
                    .to_string(),
            );
        }
        policy.workspace = Some(workspace.to_string_lossy().into_owned());
        if let Some(p) = &self.profile {
            policy.profile = p.clone();
        } else if self.policy.is_none() {
            policy.profile = "shell".to_string();
        }
        // The whole policy is validated once now, so that a bad one stops the server at its
        // start instead of refusing every call.
        policy
            .validate()
            .map_err(|r| format!("the commands' policy: {}: {}", r.field, r.reason))?;
        let metadata_prefix = self
            .metadata_env_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_METADATA_PREFIX.to_string());
        if metadata_prefix.is_empty()
            || !metadata_prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(format!(
                "--metadata-env-prefix: letters, digits and `_`, at least one, got `{}`",
                metadata_prefix.escape_debug()
            ));
        }
        Ok(ProcessApiConfig {
            grpc,
            rest,
            workspace,
            policy,
            metadata_prefix,
        })
    }
}

fn address(flag: &str, given: Option<&str>, default: &str) -> Result<SocketAddr, String> {
    let text = given.unwrap_or(default);
    text.parse().map_err(|_| {
        format!(
            "{flag}: an IP address and port (127.0.0.1:9090, [::1]:9090), got `{}`",
            text.escape_debug()
        )
    })
}

fn workspace(given: &str) -> Result<PathBuf, String> {
    let flag = "--api-workspace";
    if given.is_empty() || given.contains('\0') || !given.starts_with('/') {
        return Err(format!(
            "{flag}: an absolute directory path, got `{}`",
            given.escape_debug()
        ));
    }
    let canonical = std::fs::canonicalize(given)
        .map_err(|e| format!("{flag}: {}: {e}", given.escape_debug()))?;
    if !canonical.is_dir() {
        return Err(format!(
            "{flag}: {} is not a directory",
            canonical.display()
        ));
    }
    if canonical == std::path::Path::new("/") {
        return Err(format!(
            "{flag}: `/` would put the whole machine under /v1/files; name the workspace"
        ));
    }
    Ok(canonical)
}

/// Reads an `--api-policy` file: an exec request without the fields each call sets.
fn policy_file(file: &std::path::Path) -> Result<Request, String> {
    let flag = "--api-policy";
    let text = std::fs::read(file).map_err(|e| format!("{flag}: {}: {e}", file.display()))?;
    let mut value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| format!("{flag}: {}: malformed JSON: {e}", file.display()))?;
    let object = value
        .as_object_mut()
        .ok_or_else(|| format!("{flag}: {}: not a JSON object", file.display()))?;
    for per_call in ["argv", "cwd", "env", "stdin"] {
        if object.contains_key(per_call) {
            return Err(format!(
                "{flag}: {}: `{per_call}` is set by each call, remove it from the policy",
                file.display()
            ));
        }
    }
    object.insert("argv".into(), serde_json::json!(["/bin/true"]));
    Request::from_json(value.to_string().as_bytes())
        .map_err(|r| format!("{flag}: {}: {}: {}", file.display(), r.field, r.reason))
}
