//! `sandbox serve --process-api`: the Kubernetes agent-sandbox `sandboxd` interface, so that a
//! warm pod confines every command it is asked to run without a pod per command.
//!
//! Two listeners, as sandboxd has: gRPC `process.v1.ProcessService` (module `grpc`, the
//! interface in `proto/process/v1/process.proto`) and REST `/v1/files/{path}`, `/v1/health`,
//! `/v1/metadata` (module `rest`). Every command runs under the policy fixed when the server
//! starts (module `args`) through the one spawn engine. Built only with the `process-api`
//! cargo feature: tonic, tokio and hyper are not in the default binary. See
//! `docs/process-api.md`.

// tonic's `Status` (and axum's `Response`) are the error types of every handler: boxing them
// in the helpers would only be undone at the handlers' return.
#![allow(clippy::result_large_err)]

pub mod args;
#[cfg(feature = "process-api")]
mod beneath;
#[cfg(feature = "process-api")]
mod execute;
#[cfg(feature = "process-api")]
mod grpc;
#[cfg(feature = "process-api")]
mod rest;
#[cfg(feature = "process-api")]
mod table;

#[cfg(feature = "process-api")]
pub mod pb;

pub use args::{ProcessApiArgs, ProcessApiConfig};

/// Whether this build has the process API (the `process-api` cargo feature).
pub const AVAILABLE: bool = cfg!(feature = "process-api");

#[cfg(feature = "process-api")]
mod server;
#[cfg(feature = "process-api")]
mod start;
#[cfg(feature = "process-api")]
mod state;

#[cfg(feature = "process-api")]
pub use server::{serve, ProcessApiError};
#[cfg(feature = "process-api")]
pub use state::Shared;
