//! The OCI seccomp format's names for architectures and actions (`SCMP_ARCH_*`, Docker's
//! architecture lists, `SCMP_ACT_*`), shared by the export and the import.

use crate::action::Action;
use crate::arch::Arch;

/// The `SCMP_ARCH_*` name of an architecture.
pub const fn scmp_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "SCMP_ARCH_X86_64",
        Arch::Aarch64 => "SCMP_ARCH_AARCH64",
    }
}

/// Every architecture name libseccomp knows (`SCMP_ARCH_*`); others are refused on import.
pub const SCMP_ARCHES: &[&str] = &[
    "SCMP_ARCH_NATIVE",
    "SCMP_ARCH_X86",
    "SCMP_ARCH_X86_64",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_ARM",
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_LOONGARCH64",
    "SCMP_ARCH_M68K",
    "SCMP_ARCH_MIPS",
    "SCMP_ARCH_MIPS64",
    "SCMP_ARCH_MIPS64N32",
    "SCMP_ARCH_MIPSEL",
    "SCMP_ARCH_MIPSEL64",
    "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PPC",
    "SCMP_ARCH_PPC64",
    "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_S390",
    "SCMP_ARCH_S390X",
    "SCMP_ARCH_PARISC",
    "SCMP_ARCH_PARISC64",
    "SCMP_ARCH_RISCV64",
    "SCMP_ARCH_SH",
    "SCMP_ARCH_SHEB",
];

/// Docker's short architecture names (`includes.arches`) for ours.
pub(crate) fn docker_arch_names(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::X86_64 => &["amd64"],
        Arch::Aarch64 => &["arm64"],
    }
}

/// Every short name Docker's `includes.arches` / `excludes.arches` accept.
pub(crate) const DOCKER_ARCHES: &[&str] = &[
    "386",
    "amd64",
    "x86",
    "x32",
    "arm",
    "arm64",
    "loong64",
    "mips",
    "mipsle",
    "mips64",
    "mips64le",
    "mips64n32",
    "mips64len32",
    "ppc",
    "ppc64",
    "ppc64le",
    "riscv64",
    "s390",
    "s390x",
];

/// The JSON action for one of ours: `(SCMP_ACT_*, errnoRet)`.
pub(crate) fn scmp_action(action: Action) -> (&'static str, Option<u16>) {
    match action {
        Action::Kill => ("SCMP_ACT_KILL_PROCESS", None),
        Action::Trap => ("SCMP_ACT_TRAP", None),
        Action::Errno(e) => ("SCMP_ACT_ERRNO", Some(e)),
        Action::Log => ("SCMP_ACT_LOG", None),
        Action::Allow => ("SCMP_ACT_ALLOW", None),
    }
}
