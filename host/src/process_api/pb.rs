//! The code generated from `proto/process/v1/process.proto` (`host/proto_build.rs`).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("process.v1");
