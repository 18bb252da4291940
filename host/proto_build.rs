//! Generates the Rust types and server trait of `proto/process/v1/process.proto` (the
//! `process-api` feature). protox parses the file in Rust, so building needs no `protoc`; the
//! generated code is not checked in, so it cannot drift from the `.proto` beside it.

use std::path::Path;

/// Writes `process.v1.rs` into `out_dir`.
pub fn generate(proto_root: &Path, out_dir: &Path) {
    let file = proto_root.join("process/v1/process.proto");
    let descriptors = protox::compile([&file], [proto_root])
        .unwrap_or_else(|e| panic!("compiling {}: {e}", file.display()));
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .out_dir(out_dir)
        .compile_fds(descriptors)
        .unwrap_or_else(|e| panic!("generating code for {}: {e}", file.display()));
}
