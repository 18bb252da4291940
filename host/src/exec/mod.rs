//! The argv-only tool runtime: run one request, return one result.
//!
//! A [`Request`] names an absolute program and its arguments (never a shell command line), a
//! working directory, variables to add to a scrubbed environment, a timeout, an output cap and
//! a profile. [`exec`] validates it, runs it under the sandbox with resource limits in a new
//! session, kills the whole process tree on timeout (and every leftover descendant when the
//! program exits), reads both output streams concurrently with caps, and returns an
//! [`ExecResult`] whose `violation` names the syscall a filter stopped. `sandbox exec --json`
//! and `sandbox serve` are the same over JSON: the `Request` and `ExecResult` types are their
//! schema. See `docs/exec.md`.
//!
//! ```
//! use sandbox_host::exec::{exec, Request};
//!
//! let result = exec(&Request::new(["/bin/echo", "hello"])).unwrap();
//! assert_eq!(result.stdout, "hello\n");
//! assert_eq!(result.sandboxed.profile, "minimal");
//! ```

pub(crate) mod advice;
mod builder;
pub(crate) mod cgroup1;
mod cgroup_names;
pub(crate) mod cgroup_nest;
#[cfg(target_arch = "x86_64")]
pub(crate) mod clone;
mod conceal;
pub(crate) mod contain;
mod control_guard;
pub(crate) mod emulate;
#[doc(hidden)]
pub mod env;
pub(crate) mod exec_events;
mod git_config;
mod git_controls;
pub(crate) mod git_guard;
mod git_index;
pub(crate) mod hits;
#[doc(hidden)]
pub mod home;
#[doc(hidden)]
pub mod isolation;
mod job;
#[doc(hidden)]
pub mod json;
mod landlock_cover;
#[doc(hidden)]
pub mod leaks;
#[doc(hidden)]
pub mod limits;
pub(crate) mod memwatch;
mod namespaces;
mod net;
pub(crate) mod net_owners;
mod no_listener;
pub(crate) use job::response_of;
pub(crate) use no_listener::answer_in_program;
pub(crate) mod notify;
mod options;
mod outcome;
mod pacing;
mod paths;
mod placeholder;
pub(crate) mod procfs;
#[doc(hidden)]
pub mod record;
mod refusals;
#[doc(hidden)]
pub mod request;
mod result;
mod reverted;
mod run;
mod schema;
pub(crate) mod session_hook;
mod spawn;
#[cfg(target_arch = "x86_64")]
pub(crate) mod spawner;
mod stream;
mod supervise;
mod tee;
mod tier;
mod view;
mod workspace;

pub use crate::landlock::Status as LandlockStatus;
pub use builder::{Redaction, RequestBuilder, Requirement};
pub use contain::Containment;
pub use git_guard::Reverted as GitReverted;
pub use home::Mode as HomeMode;
pub use isolation::Status as IsolationStatus;
pub use leaks::{Encoding, Leak, LeakKind};
pub use net::Report as NetworkReport;
pub use options::{Cancel, RunOptions, StartFrom};
pub use refusals::Refused;
pub use request::{Limits, OnViolation, Refusal, Request};
pub use result::{ExecError, ExecResult, SandboxInfo, Step, Violation};
pub use run::{exec, exec_with};
pub use tier::Tier;

// Used by the other front ends (`sandbox run`, `learn`) and the tests: not part of the API.
#[doc(hidden)]
pub use contain::{limit_cgroups, Mechanism};
/// Says that this process runs one request and starts nothing else (`sandbox run`, `sandbox
/// exec`): every process it adopts as a child subreaper is that request's, and goes with it.
#[doc(hidden)]
pub fn sole_request() {
    contain::sole_request();
}
pub(crate) use hits::refused_first;
#[doc(hidden)]
pub use limits::Rlimits;
pub(crate) use outcome::{
    emulated_entries, name_refusals, scan_leaks, violation_entries, violation_entry,
};
#[doc(hidden)]
pub use paths::{preload_layer, preload_layer_writes, PreloadLayer};
#[doc(hidden)]
pub use request::{Audience, PathRules, Streams, Validated, MAX_TIMEOUT_S};
pub(crate) use run::{exec_for, learn_validated, run_validated, sandbox_for};
pub(crate) use schema::Strict;
pub(crate) use spawn::dup_above;
pub(crate) use stream::Stream;
