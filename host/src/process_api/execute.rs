//! One call's command as an engine request, and the engine's answers as the API's.
//!
//! The policy is the server's ([`super::args::ProcessApiConfig::policy`]); a call chooses only
//! the program and its arguments, variables to add, and a working directory in the workspace.

use super::pb;
use crate::exec::{ExecError, ExecResult, Request};
use crate::SandboxError;
use std::path::{Component, Path};
use tonic::{Code, Status};

/// Most arguments in one command, and most variables: the kernel's own limits are on bytes,
/// these keep one call from costing the server more than a command line could.
const MAX_ITEMS: usize = 4096;

/// The request for `config` under `policy`, the working directory checked against `workspace`.
pub fn request(
    policy: &Request,
    workspace: &Path,
    config: Option<&pb::ProcessConfig>,
) -> Result<Request, Status> {
    let config = config.ok_or_else(|| {
        Status::invalid_argument(
            "config: missing; give config.command, the program and its arguments",
        )
    })?;
    if config.command.is_empty() {
        return Err(Status::invalid_argument(
            "config.command: empty; give the program and its arguments",
        ));
    }
    if config.command.len() > MAX_ITEMS || config.env_vars.len() > MAX_ITEMS {
        return Err(Status::invalid_argument(format!(
            "config: more than {MAX_ITEMS} arguments or variables"
        )));
    }
    let mut req = policy.clone();
    req.argv = config.command.clone();
    for (k, v) in &config.env_vars {
        req.env.insert(k.clone(), v.clone());
    }
    req.cwd = Some(cwd(workspace, config.cwd.as_deref())?);
    Ok(req)
}

/// The working directory: the workspace by default, a relative path beneath it, or an absolute
/// one inside it. Its text is checked here; the engine then checks the directory itself.
fn cwd(workspace: &Path, given: Option<&str>) -> Result<String, Status> {
    let Some(text) = given.filter(|t| !t.is_empty()) else {
        return Ok(workspace.to_string_lossy().into_owned());
    };
    if text.contains('\0') {
        return Err(Status::invalid_argument("config.cwd: holds a NUL byte"));
    }
    let path = Path::new(text);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(Status::permission_denied(format!(
            "config.cwd: `{}` has a `..` component; the working directory stays in the \
             workspace {}",
            text.escape_debug(),
            workspace.display()
        )));
    }
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    };
    // Symlinks are resolved before the comparison: a link in the workspace to elsewhere is
    // elsewhere.
    let real = std::fs::canonicalize(&full)
        .map_err(|e| Status::not_found(format!("config.cwd: {}: {e}", full.display())))?;
    if !real.starts_with(workspace) {
        return Err(Status::permission_denied(format!(
            "config.cwd: `{}` is outside the workspace {}; name a directory in it",
            text.escape_debug(),
            workspace.display()
        )));
    }
    Ok(real.to_string_lossy().into_owned())
}

/// The request field as the API names it.
fn api_field(field: &str) -> String {
    let (head, rest) = field.split_at(field.find(['[', '.']).unwrap_or(field.len()));
    match head {
        "argv" => format!("config.command{rest}"),
        "env" => format!("config.env_vars{rest}"),
        "cwd" => "config.cwd".to_string(),
        // Everything else is the server's policy, not the call's.
        other => format!("the server's policy ({other}{rest})"),
    }
}

/// An engine error as a gRPC status whose message names the field and the refusal.
pub fn status(e: &ExecError) -> Status {
    let code = match e {
        // The shell's statuses: 127 not found, 126 found but not executable.
        _ if e.exit_code() == Some(crate::exec::request::EXIT_NOT_FOUND) => Code::NotFound,
        _ if e.exit_code() == Some(crate::exec::request::EXIT_CANNOT_EXECUTE) => {
            Code::PermissionDenied
        }
        ExecError::Refused(r) if r.field == "cwd" => Code::PermissionDenied,
        ExecError::Refused(r)
            if matches!(r.field.split(['[', '.']).next(), Some("argv" | "env")) =>
        {
            Code::InvalidArgument
        }
        ExecError::Refused(_) => Code::FailedPrecondition,
        ExecError::Sandbox(SandboxError::Blocked(_)) => Code::PermissionDenied,
        ExecError::Spawn { source, .. } if source.raw_os_error() == Some(libc::ENOENT) => {
            Code::NotFound
        }
        ExecError::Spawn { .. } => Code::PermissionDenied,
        ExecError::Sandbox(_) => Code::FailedPrecondition,
        _ => Code::Internal,
    };
    Status::new(code, format!("{}: {}", api_field(e.field()), e.reason()))
}

/// The status a shell reports: the exit code, or 128 + the signal that ended the program.
pub fn exit_code(r: &ExecResult) -> i32 {
    match (r.exit_code, r.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => -1,
    }
}

/// What the sandbox says about a run, one line each, as `sandbox run` says it on stderr:
/// every warning (refusals, limits hit, degraded layers) and every refused call.
pub fn report_lines(r: &ExecResult) -> Vec<String> {
    let mut lines: Vec<String> = r
        .warnings
        .iter()
        .map(|w| match w.starts_with("sandbox: ") {
            true => w.clone(),
            false => format!("sandbox: {w}"),
        })
        .collect();
    for v in &r.violations {
        let line = format!(
            "sandbox: refused {}{} ({} time{}): {}",
            v.syscall,
            v.program
                .as_deref()
                .map(|p| format!(" by {p}"))
                .unwrap_or_default(),
            v.count,
            if v.count == 1 { "" } else { "s" },
            v.hint
        );
        if !lines.iter().any(|l| l.contains(&v.hint)) {
            lines.push(line);
        }
    }
    lines
}

/// The result as JSON, less the output (sent in the response itself): the response's
/// `x-sandbox-result-bin` metadata, for clients that want every field `exec --json` gives.
pub fn result_json(r: &ExecResult) -> Vec<u8> {
    let mut r = r.clone();
    r.stdout.clear();
    r.stderr.clear();
    serde_json::to_vec(&r).unwrap_or_default()
}
