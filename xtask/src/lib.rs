//! The parts of `cargo xtask` that tests share: the command matrix, the syscall benchmark, the
//! syscall-table generator and the release bundle.

pub mod agent_matrix;
pub mod bench_syscalls;
pub mod codegen;
pub mod dist;
pub mod matrix;
