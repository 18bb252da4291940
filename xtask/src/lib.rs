//! The parts of `cargo xtask` that tests share: the command matrix and the syscall benchmark.

pub mod agent_matrix;
pub mod bench_syscalls;
pub mod matrix;
