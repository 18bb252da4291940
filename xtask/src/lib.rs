//! The parts of `cargo xtask` that tests share: the command matrix, the syscall benchmark, the
//! syscall-table generator, the release bundle and its man pages, the Debian packages the tests
//! need, and the source structure checks (import cycles, where `unsafe` may appear).

pub mod agent_matrix;
pub mod bench_syscalls;
pub mod built;
pub mod codegen;
pub mod dist;
pub mod dist_npm;
pub mod dist_wheel;
pub mod import_cycles;
pub mod man;
pub mod matrix;
pub mod module_graph;
pub mod packages;
pub mod rust_tokens;
pub mod unsafe_boundary;
