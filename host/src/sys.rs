//! The host's system-call boundary: small safe wrappers around the libc calls the rest of the
//! crate needs, so that `unsafe` lives here, each block short and with its `// SAFETY:` line.
//! One module per concept (as rust-landlock keeps one per concept); the rest of the crate
//! names them through this module (`crate::sys::pipe2`), so a wrapper can move between them
//! without a caller changing.
//!
//! Not here, and holding their own blocks: the spawn path (`exec/spawn.rs`,
//! `exec/spawn/init.rs`, `exec/spawner.rs`, `exec/clone.rs`). Much of that code runs in a
//! cloned child between `clone` and `exec`, where only async-signal-safe, allocation-free
//! calls are allowed, or hands raw pointers to such a child; xtask's `unsafe_boundary` test
//! lists each file with its reason.

mod arena;
pub(crate) mod beneath;
pub(crate) mod emulate;
mod fd;
mod fs;
mod notif;
mod pidfd;
mod probe;
mod process;
mod pty;
pub(crate) mod raw;
mod rlimit;
mod socket;

pub use arena::Arena;
pub(crate) use fd::*;
pub(crate) use fs::*;
pub(crate) use notif::*;
pub(crate) use pidfd::*;
pub(crate) use probe::*;
pub(crate) use process::*;
pub(crate) use pty::*;
pub(crate) use rlimit::*;
pub(crate) use socket::*;
