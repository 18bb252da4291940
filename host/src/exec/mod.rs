//! The argv-only tool runtime: run one request, return one result.
//!
//! A [`Request`] names an absolute program and its arguments (never a shell command line), a
//! working directory, variables to add to a scrubbed environment, a timeout, an output cap and
//! a profile. [`exec`] validates it, runs it under the sandbox with resource limits in a new
//! session, kills the whole process tree on timeout (and every leftover descendant when the
//! program exits), reads both output streams concurrently with caps, and returns an
//! [`ExecResult`] whose `violation` names the syscall a filter stopped. [`json::run_json`] is
//! the same for `sandbox exec --json`. See `docs/exec.md`.

mod advice;
mod builder;
mod cgroup1;
#[cfg(target_arch = "x86_64")]
mod clone;
mod contain;
pub mod env;
pub(crate) mod exec_events;
mod hits;
pub mod isolation;
pub mod json;
pub mod leaks;
pub mod limits;
mod net;
mod notify;
mod paths;
pub mod record;
pub mod request;
mod run;
mod schema;
mod spawn;
#[cfg(target_arch = "x86_64")]
mod spawner;

pub use builder::{Redaction, RequestBuilder, Requirement};
pub use contain::{limit_cgroups, Containment, Mechanism};
pub use leaks::{Encoding, Leak, LeakKind};
pub use limits::Rlimits;
pub use net::Report as NetworkReport;
pub use paths::{preload_layer, PreloadLayer};
pub use request::{Audience, Limits, OnViolation, PathRules, Refusal, Request, Streams, Validated};
pub use run::{exec, exec_with, Cancel, ExecError, ExecResult, RunOptions, SandboxInfo, Violation};
pub(crate) use run::{learn_validated, run_validated};
