//! `sandbox_host`: runs commands under the sandbox.
//!
//! It embeds `libsandbox.so`, extracts it safely, decides per program whether a preload can
//! confine it, turns profiles into filters, and runs commands with limits, reporting violations
//! in words an agent can act on.

pub mod admission;
pub mod embedded;
pub mod extract;
pub mod platform;

pub use sandbox_policy as policy;
