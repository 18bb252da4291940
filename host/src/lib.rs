//! `sandbox_host`: runs commands under the sandbox.
//!
//! It embeds `libsandbox.so`, extracts it safely, decides per program whether a preload can
//! confine it, turns profiles into filters, and runs commands with limits, reporting violations
//! in words an agent can act on.

#![deny(missing_docs)]

pub mod admission;
pub mod cli;
pub mod embedded;
pub mod exec;
pub mod extract;
pub mod interchange;
pub mod landlock;
pub mod layer_mode;
pub mod learn;
pub mod network;
pub mod outer;
pub mod platform;
pub mod proxy;
mod refusal;

pub use sandbox_policy as policy;
pub mod config;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod serve;
mod sys;

pub use sandbox::{Options, Sandbox, SandboxError, Sandboxed, StaticBinaryAction};

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
