//! `sandbox_host`: runs commands under the sandbox.
//!
//! It embeds `libsandbox.so`, extracts it safely, decides per program whether a preload can
//! confine it, turns profiles into filters, and runs commands with limits, reporting violations
//! in words an agent can act on.

#![deny(missing_docs)]
//!
//! # The library API
//!
//! A [`Request`](exec::Request) names a program and its arguments (never a shell line) and
//! how to run it; [`exec::exec`] validates it, runs it under the sandbox and returns an
//! [`ExecResult`](exec::ExecResult), or an [`ExecError`](exec::ExecError) naming the request
//! field at fault. The same `Request` is the JSON schema of `sandbox exec --json` and
//! `sandbox serve`, and `ExecResult` their result: the Rust API and the JSON cannot drift.
//!
//! ```
//! use sandbox_host::exec::{self, OnViolation, Request};
//! use std::time::Duration;
//!
//! let result = exec::exec(
//!     &Request::builder(["/bin/sh", "-c", "echo hi; exit 2"])
//!         .profile("shell")
//!         .timeout(Duration::from_secs(10))
//!         .on_violation(OnViolation::Report)
//!         .build(),
//! )
//! .unwrap();
//! assert_eq!((result.exit_code, result.stdout.as_str()), (Some(2), "hi\n"));
//!
//! // Bad input is refused before anything runs, naming the field and keeping the value.
//! let err = exec::exec(&Request::builder(["/bin/true"]).cwd("relative").build()).unwrap_err();
//! assert_eq!(err.field(), "cwd");
//! assert!(err.reason().contains("`relative`"));
//! ```
//!
//! The public items are listed in `docs/reference.md` (section "Library API"); a test keeps
//! that list and this crate's public items the same. The modules marked hidden are the
//! internals of the `sandbox` command and its tests, not part of the API.

pub mod exec;
pub mod serve;
pub mod session;
mod sys;

pub use layer_mode::LayerMode;
pub use network::Mode as NetworkMode;
pub use sandbox::{SandboxError, Sandboxed, StaticBinaryAction};
pub use sandbox_policy::profile::{Profile, ProfileError};

mod aside;
mod beneath;

// Internals used by the `sandbox` command and the tests: not part of the API.
#[doc(hidden)]
pub mod admission;
#[doc(hidden)]
pub mod check;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod control_files;
#[doc(hidden)]
pub mod credentials;
#[doc(hidden)]
pub mod embedded;
#[doc(hidden)]
pub mod escape;
#[doc(hidden)]
pub mod extract;
#[doc(hidden)]
pub mod interchange;
#[doc(hidden)]
pub mod landlock;
#[doc(hidden)]
pub mod layer_mode;
#[doc(hidden)]
pub mod learn;
#[doc(hidden)]
pub mod mcp;
mod mountinfo;
#[doc(hidden)]
pub mod network;
#[doc(hidden)]
pub mod outer;
mod peer;
#[doc(hidden)]
pub mod platform;
#[doc(hidden)]
pub mod preload_notice;
#[doc(hidden)]
pub mod process_api;
#[doc(hidden)]
pub mod proxy;
mod refusal;
#[doc(hidden)]
pub mod report;
#[doc(hidden)]
pub mod run;
#[doc(hidden)]
pub mod sandbox;
mod state_dir;
#[doc(hidden)]
pub mod sysv_ipc;
#[doc(hidden)]
pub use sandbox::{Options, Sandbox};
#[doc(hidden)]
pub use sandbox_policy as policy;
/// The `sandbox` binary's allocator (an arena for its small allocations): not for libraries.
#[doc(hidden)]
pub use sys::Arena;

#[doc(hidden)]
/// Variables the sandbox owns in a child's environment; inherited values are removed.
pub const SANDBOX_VARS: &[&str] = &[
    "LD_PRELOAD",
    "SECCOMP_SYSCALL_ALLOW",
    "SECCOMP_SYSCALL_DENY",
    "SECCOMP_DEFAULT_ACTION",
    "SECCOMP_VERBOSE",
    "SECCOMP_REPORT_FD",
    "SANDBOX_LANDLOCK",
];
