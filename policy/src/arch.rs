//! Target architectures: each one's name and audit value (its syscall table, and the
//! `syscall_number`/`syscall_name` methods, are in `syscalls`, which builds on this module).
//! Arch is data, not a `cfg`, so the host can compile and test policies for an architecture it
//! does not run on.

/// An architecture a policy can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86_64 (AUDIT_ARCH_X86_64); the x32 ABI and i386 `int 0x80` are killed by every filter.
    X86_64,
    /// aarch64 (AUDIT_ARCH_AARCH64); compat arm32 calls are killed by every filter.
    Aarch64,
}

/// The architecture this crate was compiled for.
#[cfg(target_arch = "x86_64")]
pub const NATIVE: Arch = Arch::X86_64;
/// The architecture this crate was compiled for.
#[cfg(target_arch = "aarch64")]
pub const NATIVE: Arch = Arch::Aarch64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("sandbox supports x86_64 and aarch64 only");

impl Arch {
    /// The `seccomp_data.arch` value the kernel reports for native calls of this architecture.
    pub const fn audit_arch(self) -> u32 {
        match self {
            Arch::X86_64 => 0xC000_003E,
            Arch::Aarch64 => 0xC000_00B7,
        }
    }

    /// The name used in messages and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// Parses `x86_64` or `aarch64`.
    pub fn from_name(name: &str) -> Option<Arch> {
        match name {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// Whether syscall numbers with bit 30 set (the x32 ABI on x86_64) must be killed.
    pub const fn has_x32(self) -> bool {
        matches!(self, Arch::X86_64)
    }
}
