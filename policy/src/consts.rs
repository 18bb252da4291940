//! Named constants usable in argument rules (`O_WRONLY`, `AF_UNIX`, `CLONE_THREAD`, `TIOCSTI`)
//! and errno names usable as actions (`EROFS`). Values are the kernel's; the few that differ
//! between architectures are listed per architecture. A test checks them against `libc`.

use crate::arch::Arch;

/// Constants with the same value on every supported architecture.
static COMMON: &[(&str, u64)] = &[
    // open(2) flags.
    ("O_RDONLY", 0),
    ("O_WRONLY", 0o1),
    ("O_RDWR", 0o2),
    ("O_ACCMODE", 0o3),
    ("O_CREAT", 0o100),
    ("O_EXCL", 0o200),
    ("O_NOCTTY", 0o400),
    ("O_TRUNC", 0o1000),
    ("O_APPEND", 0o2000),
    ("O_NONBLOCK", 0o4000),
    ("O_DSYNC", 0o10000),
    ("O_SYNC", 0o4010000),
    ("O_NOATIME", 0o1000000),
    ("O_CLOEXEC", 0o2000000),
    ("O_PATH", 0o10000000),
    // Address families.
    ("AF_UNSPEC", 0),
    ("AF_UNIX", 1),
    ("AF_LOCAL", 1),
    ("AF_INET", 2),
    ("AF_AX25", 3),
    ("AF_IPX", 4),
    ("AF_APPLETALK", 5),
    ("AF_BRIDGE", 7),
    ("AF_INET6", 10),
    ("AF_KEY", 15),
    ("AF_NETLINK", 16),
    ("AF_PACKET", 17),
    ("AF_RDS", 21),
    ("AF_CAN", 29),
    ("AF_TIPC", 30),
    ("AF_BLUETOOTH", 31),
    ("AF_ALG", 38),
    ("AF_VSOCK", 40),
    ("AF_XDP", 44),
    // Socket types and flags.
    ("SOCK_STREAM", 1),
    ("SOCK_DGRAM", 2),
    ("SOCK_RAW", 3),
    ("SOCK_RDM", 4),
    ("SOCK_SEQPACKET", 5),
    ("SOCK_NONBLOCK", 0o4000),
    ("SOCK_CLOEXEC", 0o2000000),
    // IP protocols.
    ("IPPROTO_MPTCP", 262),
    // Netlink protocols.
    ("NETLINK_ROUTE", 0),
    ("NETLINK_AUDIT", 9),
    // clone(2) flags.
    ("CSIGNAL", 0xff),
    ("CLONE_NEWTIME", 0x80),
    ("CLONE_VM", 0x100),
    ("CLONE_FS", 0x200),
    ("CLONE_FILES", 0x400),
    ("CLONE_SIGHAND", 0x800),
    ("CLONE_PIDFD", 0x1000),
    ("CLONE_PTRACE", 0x2000),
    ("CLONE_VFORK", 0x4000),
    ("CLONE_PARENT", 0x8000),
    ("CLONE_THREAD", 0x10000),
    ("CLONE_NEWNS", 0x20000),
    ("CLONE_SYSVSEM", 0x40000),
    ("CLONE_SETTLS", 0x80000),
    ("CLONE_PARENT_SETTID", 0x100000),
    ("CLONE_CHILD_CLEARTID", 0x200000),
    ("CLONE_DETACHED", 0x400000),
    ("CLONE_UNTRACED", 0x800000),
    ("CLONE_CHILD_SETTID", 0x1000000),
    ("CLONE_NEWCGROUP", 0x2000000),
    ("CLONE_NEWUTS", 0x4000000),
    ("CLONE_NEWIPC", 0x8000000),
    ("CLONE_NEWUSER", 0x10000000),
    ("CLONE_NEWPID", 0x20000000),
    ("CLONE_NEWNET", 0x40000000),
    ("CLONE_IO", 0x80000000),
    // Every namespace flag of clone/unshare at once.
    ("CLONE_NEWALL", 0x7E02_0080),
    // Terminal ioctls (the generic numbers, shared by x86_64 and aarch64).
    ("TCGETS", 0x5401),
    ("TCSETS", 0x5402),
    ("TCSETSW", 0x5403),
    ("TCSETSF", 0x5404),
    ("TIOCSCTTY", 0x540E),
    ("TIOCGPGRP", 0x540F),
    ("TIOCSPGRP", 0x5410),
    ("TIOCSTI", 0x5412),
    ("TIOCGWINSZ", 0x5413),
    ("TIOCSWINSZ", 0x5414),
    ("FIONREAD", 0x541B),
    ("TIOCLINUX", 0x541C),
    ("FIONBIO", 0x5421),
    ("FIOCLEX", 0x5451),
    ("FIONCLEX", 0x5450),
    // Owners of a descriptor's I/O signals: ioctl(2) forms of fcntl(F_SETOWN).
    ("FIOSETOWN", 0x8901),
    ("SIOCSPGRP", 0x8902),
    // fcntl(2) commands that route a descriptor's signals to a process (asm-generic values).
    ("F_SETOWN", 8),
    ("F_GETOWN", 9),
    ("F_SETSIG", 10),
    ("F_GETSIG", 11),
    ("F_SETOWN_EX", 15),
    ("F_GETOWN_EX", 16),
    // *at() conventions.
    ("AT_FDCWD", 0xFFFF_FF9C),
    ("AT_SYMLINK_NOFOLLOW", 0x100),
    ("AT_REMOVEDIR", 0x200),
    ("AT_SYMLINK_FOLLOW", 0x400),
    ("AT_EMPTY_PATH", 0x1000),
    // prctl(2) options.
    ("PR_SET_PDEATHSIG", 1),
    ("PR_GET_PDEATHSIG", 2),
    ("PR_GET_DUMPABLE", 3),
    ("PR_SET_DUMPABLE", 4),
    ("PR_SET_NAME", 15),
    ("PR_GET_NAME", 16),
    ("PR_GET_SECCOMP", 21),
    ("PR_SET_SECCOMP", 22),
    ("PR_CAPBSET_READ", 23),
    ("PR_GET_TIMERSLACK", 30),
    ("PR_SET_CHILD_SUBREAPER", 36),
    ("PR_SET_NO_NEW_PRIVS", 38),
    ("PR_GET_NO_NEW_PRIVS", 39),
    ("PR_SET_VMA", 0x53564d41),
    // personality(2).
    ("PER_LINUX", 0),
    ("PER_QUERY", 0xFFFF_FFFF),
    // seccomp(2) operations.
    ("SECCOMP_SET_MODE_STRICT", 0),
    ("SECCOMP_SET_MODE_FILTER", 1),
    ("SECCOMP_GET_ACTION_AVAIL", 2),
    ("SECCOMP_GET_NOTIF_SIZES", 3),
    // mmap/mprotect protections.
    ("PROT_READ", 1),
    ("PROT_WRITE", 2),
    ("PROT_EXEC", 4),
];

/// Constants whose value depends on the architecture: x86_64 first, aarch64 second.
static PER_ARCH: &[(&str, u64, u64)] = &[
    ("O_DIRECT", 0o40000, 0o200000),
    ("O_LARGEFILE", 0o100000, 0o400000),
    ("O_DIRECTORY", 0o200000, 0o40000),
    ("O_NOFOLLOW", 0o400000, 0o100000),
    ("O_TMPFILE", 0o20200000, 0o20040000),
];

/// The value of the named constant on `arch`.
pub fn constant(arch: Arch, name: &str) -> Option<u64> {
    if let Some((_, v)) = COMMON.iter().find(|(n, _)| *n == name) {
        return Some(*v);
    }
    PER_ARCH
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, x86, arm)| match arch {
            Arch::X86_64 => *x86,
            Arch::Aarch64 => *arm,
        })
}

/// Every constant name and its value on `arch`, for documentation and tests.
pub fn constants(arch: Arch) -> impl Iterator<Item = (&'static str, u64)> {
    COMMON
        .iter()
        .copied()
        .chain(PER_ARCH.iter().map(move |(n, x86, arm)| {
            (
                *n,
                match arch {
                    Arch::X86_64 => *x86,
                    Arch::Aarch64 => *arm,
                },
            )
        }))
}

/// Errno names and numbers (the same on x86_64 and aarch64).
#[rustfmt::skip]
pub static ERRNOS: &[(&str, u16)] = &[
    ("EPERM", 1), ("ENOENT", 2), ("ESRCH", 3), ("EINTR", 4), ("EIO", 5), ("ENXIO", 6),
    ("E2BIG", 7), ("ENOEXEC", 8), ("EBADF", 9), ("ECHILD", 10), ("EAGAIN", 11),
    ("ENOMEM", 12), ("EACCES", 13), ("EFAULT", 14), ("ENOTBLK", 15), ("EBUSY", 16),
    ("EEXIST", 17), ("EXDEV", 18), ("ENODEV", 19), ("ENOTDIR", 20), ("EISDIR", 21),
    ("EINVAL", 22), ("ENFILE", 23), ("EMFILE", 24), ("ENOTTY", 25), ("ETXTBSY", 26),
    ("EFBIG", 27), ("ENOSPC", 28), ("ESPIPE", 29), ("EROFS", 30), ("EMLINK", 31),
    ("EPIPE", 32), ("EDOM", 33), ("ERANGE", 34), ("EDEADLK", 35), ("ENAMETOOLONG", 36),
    ("ENOLCK", 37), ("ENOSYS", 38), ("ENOTEMPTY", 39), ("ELOOP", 40), ("ENOMSG", 42),
    ("EIDRM", 43), ("ENOSTR", 60), ("ENODATA", 61), ("ETIME", 62), ("ENOSR", 63),
    ("ENOLINK", 67), ("EPROTO", 71), ("EBADMSG", 74), ("EOVERFLOW", 75), ("EILSEQ", 84),
    ("EUSERS", 87), ("ENOTSOCK", 88), ("EDESTADDRREQ", 89), ("EMSGSIZE", 90),
    ("EPROTOTYPE", 91), ("ENOPROTOOPT", 92), ("EPROTONOSUPPORT", 93),
    ("ESOCKTNOSUPPORT", 94), ("EOPNOTSUPP", 95), ("EPFNOSUPPORT", 96), ("EAFNOSUPPORT", 97),
    ("EADDRINUSE", 98), ("EADDRNOTAVAIL", 99), ("ENETDOWN", 100), ("ENETUNREACH", 101),
    ("ENETRESET", 102), ("ECONNABORTED", 103), ("ECONNRESET", 104), ("ENOBUFS", 105),
    ("EISCONN", 106), ("ENOTCONN", 107), ("ESHUTDOWN", 108), ("ETOOMANYREFS", 109),
    ("ETIMEDOUT", 110), ("ECONNREFUSED", 111), ("EHOSTDOWN", 112), ("EHOSTUNREACH", 113),
    ("EALREADY", 114), ("EINPROGRESS", 115), ("ESTALE", 116), ("EDQUOT", 122),
    ("ECANCELED", 125), ("ENOKEY", 126), ("EKEYEXPIRED", 127), ("EKEYREVOKED", 128),
    ("EKEYREJECTED", 129), ("EOWNERDEAD", 130), ("ENOTRECOVERABLE", 131), ("ERFKILL", 132),
    ("EHWPOISON", 133),
];

/// The number of an errno name such as `EACCES`.
pub fn errno(name: &str) -> Option<u16> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The name of an errno number, if it has one.
pub fn errno_name(value: u16) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, v)| *v == value).map(|(n, _)| *n)
}
