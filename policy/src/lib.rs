//! The one place that knows syscalls: name tables, groups, the list grammar of
//! `SECCOMP_SYSCALL_ALLOW` / `SECCOMP_SYSCALL_DENY`, profiles, and compilation to seccomp BPF.
//!
//! Used by the preload (`no_std`, no allocation: everything here works on fixed-capacity values)
//! and by the host (feature `std`: profile files, owned errors).
//!
//! ```text
//! text --grammar--> Policy (IR, validated) --bpf::compile--> [Insn] --install--> kernel
//! ```
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod action;
pub mod arch;
pub mod bpf;
pub mod consts;
pub mod error;
pub mod grammar;
pub mod groups;
pub mod install;
pub mod limits;
#[cfg(feature = "std")]
pub mod oci;
pub mod policy;
#[cfg(feature = "std")]
pub mod profile;
pub mod spawner;
pub mod syscalls;

pub use action::Action;
pub use arch::{Arch, NATIVE};
pub use bpf::{compile, Insn, MAX_INSNS};
pub use error::{Error, ErrorKind, Source};
pub use grammar::{from_env, parse_exemptions, parse_list};
pub use install::{install, InstallError};
pub use limits::{MAX_ENTRIES, MAX_VALUE_LEN};
pub use policy::{CmpOp, Cond, Mode, Policy, Width};
