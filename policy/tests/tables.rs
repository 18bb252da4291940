//! The generated syscall tables and the named constants against the `libc` crate.

use sandbox_policy::{consts, syscalls, Arch};

macro_rules! sys {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), libc::$name as i64)),*]
    };
}

/// `libc::SYS_*` for x86_64, by hand: the calls that matter to a sandbox and a spread of the rest.
#[cfg(target_arch = "x86_64")]
const NATIVE_SYS: &[(&str, i64)] = sys![
    SYS_read,
    SYS_write,
    SYS_open,
    SYS_close,
    SYS_stat,
    SYS_fstat,
    SYS_lstat,
    SYS_poll,
    SYS_lseek,
    SYS_mmap,
    SYS_mprotect,
    SYS_munmap,
    SYS_brk,
    SYS_rt_sigaction,
    SYS_rt_sigprocmask,
    SYS_rt_sigreturn,
    SYS_ioctl,
    SYS_pread64,
    SYS_pwrite64,
    SYS_readv,
    SYS_writev,
    SYS_access,
    SYS_pipe,
    SYS_select,
    SYS_sched_yield,
    SYS_mremap,
    SYS_madvise,
    SYS_dup,
    SYS_dup2,
    SYS_pause,
    SYS_nanosleep,
    SYS_getpid,
    SYS_sendfile,
    SYS_socket,
    SYS_connect,
    SYS_accept,
    SYS_sendto,
    SYS_recvfrom,
    SYS_bind,
    SYS_listen,
    SYS_socketpair,
    SYS_clone,
    SYS_fork,
    SYS_vfork,
    SYS_execve,
    SYS_exit,
    SYS_wait4,
    SYS_kill,
    SYS_uname,
    SYS_fcntl,
    SYS_flock,
    SYS_fsync,
    SYS_truncate,
    SYS_ftruncate,
    SYS_getdents,
    SYS_getcwd,
    SYS_chdir,
    SYS_rename,
    SYS_mkdir,
    SYS_rmdir,
    SYS_creat,
    SYS_link,
    SYS_unlink,
    SYS_symlink,
    SYS_readlink,
    SYS_chmod,
    SYS_chown,
    SYS_umask,
    SYS_gettimeofday,
    SYS_getrlimit,
    SYS_ptrace,
    SYS_getuid,
    SYS_setuid,
    SYS_setsid,
    SYS_capget,
    SYS_capset,
    SYS_sigaltstack,
    SYS_uselib,
    SYS_personality,
    SYS_statfs,
    SYS_setpriority,
    SYS_mlock,
    SYS_vhangup,
    SYS_modify_ldt,
    SYS_pivot_root,
    SYS_prctl,
    SYS_arch_prctl,
    SYS_adjtimex,
    SYS_chroot,
    SYS_sync,
    SYS_acct,
    SYS_settimeofday,
    SYS_mount,
    SYS_umount2,
    SYS_swapon,
    SYS_reboot,
    SYS_sethostname,
    SYS_iopl,
    SYS_ioperm,
    SYS_init_module,
    SYS_delete_module,
    SYS_quotactl,
    SYS_gettid,
    SYS_readahead,
    SYS_setxattr,
    SYS_getxattr,
    SYS_tkill,
    SYS_time,
    SYS_futex,
    SYS_sched_setaffinity,
    SYS_lookup_dcookie,
    SYS_epoll_create,
    SYS_getdents64,
    SYS_set_tid_address,
    SYS_restart_syscall,
    SYS_fadvise64,
    SYS_clock_gettime,
    SYS_clock_nanosleep,
    SYS_exit_group,
    SYS_epoll_wait,
    SYS_tgkill,
    SYS_utimes,
    SYS_mbind,
    SYS_kexec_load,
    SYS_waitid,
    SYS_add_key,
    SYS_request_key,
    SYS_keyctl,
    SYS_inotify_init,
    SYS_openat,
    SYS_mkdirat,
    SYS_newfstatat,
    SYS_unlinkat,
    SYS_renameat,
    SYS_linkat,
    SYS_faccessat,
    SYS_pselect6,
    SYS_ppoll,
    SYS_unshare,
    SYS_set_robust_list,
    SYS_splice,
    SYS_tee,
    SYS_vmsplice,
    SYS_move_pages,
    SYS_utimensat,
    SYS_epoll_pwait,
    SYS_signalfd,
    SYS_timerfd_create,
    SYS_eventfd,
    SYS_fallocate,
    SYS_accept4,
    SYS_eventfd2,
    SYS_epoll_create1,
    SYS_dup3,
    SYS_pipe2,
    SYS_inotify_init1,
    SYS_preadv,
    SYS_perf_event_open,
    SYS_recvmmsg,
    SYS_fanotify_init,
    SYS_prlimit64,
    SYS_name_to_handle_at,
    SYS_open_by_handle_at,
    SYS_syncfs,
    SYS_sendmmsg,
    SYS_setns,
    SYS_getcpu,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
    SYS_finit_module,
    SYS_sched_setattr,
    SYS_renameat2,
    SYS_seccomp,
    SYS_getrandom,
    SYS_memfd_create,
    SYS_kexec_file_load,
    SYS_bpf,
    SYS_execveat,
    SYS_userfaultfd,
    SYS_membarrier,
    SYS_mlock2,
    SYS_copy_file_range,
    SYS_preadv2,
    SYS_pwritev2,
    SYS_pkey_mprotect,
    SYS_statx,
    SYS_rseq,
    SYS_pidfd_send_signal,
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_open_tree,
    SYS_move_mount,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_pidfd_open,
    SYS_clone3,
    SYS_close_range,
    SYS_openat2,
    SYS_pidfd_getfd,
    SYS_faccessat2,
    SYS_process_madvise,
    SYS_epoll_pwait2,
    SYS_mount_setattr,
    SYS_quotactl_fd,
    SYS_landlock_create_ruleset,
    SYS_landlock_add_rule,
    SYS_landlock_restrict_self,
    SYS_memfd_secret,
    SYS_process_mrelease,
    SYS_futex_waitv,
    SYS_set_mempolicy_home_node,
    SYS_fchmodat2,
    SYS_mseal,
];

#[cfg(target_arch = "aarch64")]
const NATIVE_SYS: &[(&str, i64)] = sys![
    SYS_read,
    SYS_write,
    SYS_openat,
    SYS_close,
    SYS_clone,
    SYS_clone3,
    SYS_execve,
    SYS_execveat,
    SYS_socket,
    SYS_io_uring_setup,
    SYS_landlock_create_ruleset,
    SYS_openat2,
    SYS_ptrace,
];

#[test]
fn native_table_matches_libc() {
    let arch = sandbox_policy::NATIVE;
    assert!(NATIVE_SYS.len() > 60 || cfg!(target_arch = "aarch64"));
    for &(sys, nr) in NATIVE_SYS {
        let name = sys.strip_prefix("SYS_").unwrap();
        assert_eq!(arch.syscall_number(name).map(i64::from), Some(nr), "{name}");
        assert_eq!(arch.syscall_name(nr as u32), Some(name), "{nr}");
    }
}

#[test]
fn x86_64_numbers() {
    let x = Arch::X86_64;
    for (name, nr) in [
        ("read", 0),
        ("write", 1),
        ("open", 2),
        ("openat", 257),
        ("openat2", 437),
        ("socket", 41),
        ("clone", 56),
        ("clone3", 435),
        ("execve", 59),
        ("execveat", 322),
        ("io_uring_setup", 425),
        ("landlock_create_ruleset", 444),
        ("mseal", 462),
        ("file_getattr", 468),
        ("file_setattr", 469),
        ("rt_sigreturn", 15),
    ] {
        assert_eq!(x.syscall_number(name), Some(nr), "{name}");
        assert_eq!(x.syscall_name(nr), Some(name));
    }
}

#[test]
fn aarch64_numbers() {
    let a = Arch::Aarch64;
    for (name, nr) in [
        ("io_setup", 0),
        ("openat", 56),
        ("close", 57),
        ("read", 63),
        ("write", 64),
        ("clone", 220),
        ("execve", 221),
        ("mmap", 222),
        ("rt_sigreturn", 139),
        ("io_uring_setup", 425),
        ("clone3", 435),
        ("landlock_create_ruleset", 444),
        ("mseal", 462),
        ("file_setattr", 469),
    ] {
        assert_eq!(a.syscall_number(name), Some(nr), "{name}");
        assert_eq!(a.syscall_name(nr), Some(name));
    }
    for missing in [
        "open",
        "stat",
        "fork",
        "dup2",
        "access",
        "pipe",
        "poll",
        "epoll_wait",
        "time",
    ] {
        assert_eq!(
            a.syscall_number(missing),
            None,
            "{missing} does not exist on aarch64"
        );
    }
}

#[test]
fn tables_are_consistent_both_ways() {
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let all: Vec<(&str, u16)> = syscalls::all(arch).collect();
        assert!(all.len() > 300);
        assert!(
            all.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted by name, no duplicates"
        );
        for &(name, nr) in &all {
            assert_eq!(arch.syscall_number(name), Some(u32::from(nr)));
            assert_eq!(arch.syscall_name(u32::from(nr)), Some(name));
            assert!(u32::from(nr) < syscalls::table_len(arch));
        }
        let named = (0..syscalls::table_len(arch))
            .filter(|&n| arch.syscall_name(n).is_some())
            .count();
        assert_eq!(named, all.len());
        // The newest call of the pinned source is present (syscalls 0.8.1's iterator drops it).
        assert_eq!(syscalls::table_len(arch), 470);
        assert_eq!(arch.syscall_name(syscalls::table_len(arch)), None);
        assert_eq!(arch.syscall_number(""), None);
        assert_eq!(arch.syscall_number("READ"), None);
        // A name's prefix or extension is not the name.
        for near in ["rea", "readx", "read\0", "read ", "writev2", "w"] {
            assert_eq!(arch.syscall_number(near), None, "{near:?}");
        }
    }
}

macro_rules! consts {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), libc::$name as u32 as u64)),*]
    };
}

#[test]
fn constants_match_libc() {
    let arch = sandbox_policy::NATIVE;
    let expected: &[(&str, u64)] = consts![
        O_RDONLY,
        O_WRONLY,
        O_RDWR,
        O_ACCMODE,
        O_CREAT,
        O_EXCL,
        O_NOCTTY,
        O_TRUNC,
        O_APPEND,
        O_NONBLOCK,
        O_DSYNC,
        O_SYNC,
        O_NOATIME,
        O_CLOEXEC,
        O_PATH,
        O_DIRECT,
        O_DIRECTORY,
        O_NOFOLLOW,
        O_TMPFILE,
        AF_UNSPEC,
        AF_UNIX,
        AF_LOCAL,
        AF_INET,
        AF_AX25,
        AF_IPX,
        AF_APPLETALK,
        AF_BRIDGE,
        AF_INET6,
        AF_KEY,
        AF_NETLINK,
        AF_PACKET,
        AF_RDS,
        AF_CAN,
        AF_TIPC,
        AF_BLUETOOTH,
        AF_ALG,
        AF_VSOCK,
        AF_XDP,
        SOCK_STREAM,
        SOCK_DGRAM,
        SOCK_RAW,
        SOCK_RDM,
        SOCK_SEQPACKET,
        SOCK_NONBLOCK,
        SOCK_CLOEXEC,
        IPPROTO_MPTCP,
        NETLINK_ROUTE,
        NETLINK_AUDIT,
        CSIGNAL,
        CLONE_NEWTIME,
        CLONE_VM,
        CLONE_FS,
        CLONE_FILES,
        CLONE_SIGHAND,
        CLONE_PIDFD,
        CLONE_PTRACE,
        CLONE_VFORK,
        CLONE_PARENT,
        CLONE_THREAD,
        CLONE_NEWNS,
        CLONE_SYSVSEM,
        CLONE_SETTLS,
        CLONE_PARENT_SETTID,
        CLONE_CHILD_CLEARTID,
        CLONE_DETACHED,
        CLONE_UNTRACED,
        CLONE_CHILD_SETTID,
        CLONE_NEWCGROUP,
        CLONE_NEWUTS,
        CLONE_NEWIPC,
        CLONE_NEWUSER,
        CLONE_NEWPID,
        CLONE_NEWNET,
        CLONE_IO,
        TCGETS,
        TCSETS,
        TCSETSW,
        TCSETSF,
        TIOCSCTTY,
        TIOCGPGRP,
        TIOCSPGRP,
        TIOCSTI,
        TIOCGWINSZ,
        TIOCSWINSZ,
        FIONREAD,
        TIOCLINUX,
        FIONBIO,
        FIOCLEX,
        FIONCLEX,
        F_SETOWN,
        F_GETOWN,
        AT_FDCWD,
        AT_SYMLINK_NOFOLLOW,
        AT_REMOVEDIR,
        AT_SYMLINK_FOLLOW,
        AT_EMPTY_PATH,
        PR_SET_PDEATHSIG,
        PR_GET_PDEATHSIG,
        PR_GET_DUMPABLE,
        PR_SET_DUMPABLE,
        PR_SET_NAME,
        PR_GET_NAME,
        PR_GET_SECCOMP,
        PR_SET_SECCOMP,
        PR_CAPBSET_READ,
        PR_GET_TIMERSLACK,
        PR_SET_CHILD_SUBREAPER,
        PR_SET_NO_NEW_PRIVS,
        PR_GET_NO_NEW_PRIVS,
        PR_SET_VMA,
        SECCOMP_SET_MODE_STRICT,
        SECCOMP_SET_MODE_FILTER,
        SECCOMP_GET_ACTION_AVAIL,
        SECCOMP_GET_NOTIF_SIZES,
        PROT_READ,
        PROT_WRITE,
        PROT_EXEC,
    ];
    for &(name, value) in expected {
        assert_eq!(consts::constant(arch, name), Some(value), "{name}");
    }
    // Every constant we define is checked above, apart from the documented exceptions.
    let checked: Vec<&str> = expected.iter().map(|e| e.0).collect();
    for (name, _) in consts::constants(arch) {
        let exception = matches!(
            name,
            "O_LARGEFILE" | "CLONE_NEWALL" | "PER_LINUX" | "PER_QUERY"
        ) || LIBC_LACKS.contains(&name);
        assert!(
            checked.contains(&name) || exception,
            "{name} is not checked against libc"
        );
    }
    // glibc defines O_LARGEFILE as 0 on 64-bit targets; the kernel's bit is what a 32-bit
    // caller passes.
    let largefile = consts::constant(arch, "O_LARGEFILE").unwrap();
    assert_eq!(
        largefile,
        if cfg!(target_arch = "x86_64") {
            0o100000
        } else {
            0o400000
        }
    );
    let newall = libc::CLONE_NEWNS
        | libc::CLONE_NEWCGROUP
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWTIME;
    assert_eq!(
        consts::constant(arch, "CLONE_NEWALL"),
        Some(newall as u32 as u64)
    );
    assert_eq!(consts::constant(arch, "PER_LINUX"), Some(0));
    assert_eq!(consts::constant(arch, "PER_QUERY"), Some(0xffff_ffff));
    assert_eq!(consts::constant(arch, "O_BOGUS"), None);
    assert_eq!(consts::constant(arch, "o_rdonly"), None);
}

#[test]
fn aarch64_open_flags_differ() {
    let a = Arch::Aarch64;
    assert_eq!(consts::constant(a, "O_DIRECTORY"), Some(0o40000));
    assert_eq!(consts::constant(a, "O_NOFOLLOW"), Some(0o100000));
    assert_eq!(consts::constant(a, "O_DIRECT"), Some(0o200000));
    assert_eq!(consts::constant(a, "O_TMPFILE"), Some(0o20040000));
    assert_eq!(
        consts::constant(Arch::X86_64, "O_TMPFILE"),
        Some(0o20200000)
    );
}

#[test]
fn constant_names_are_unique() {
    for arch in [Arch::X86_64, Arch::Aarch64] {
        let mut names: Vec<&str> = consts::constants(arch).map(|c| c.0).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}

#[test]
fn errnos_match_libc() {
    macro_rules! errnos {
        ($($name:ident),* $(,)?) => { &[$((stringify!($name), libc::$name)),*] };
    }
    let expected: &[(&str, i32)] = errnos![
        EPERM,
        ENOENT,
        ESRCH,
        EINTR,
        EIO,
        ENXIO,
        E2BIG,
        ENOEXEC,
        EBADF,
        ECHILD,
        EAGAIN,
        ENOMEM,
        EACCES,
        EFAULT,
        ENOTBLK,
        EBUSY,
        EEXIST,
        EXDEV,
        ENODEV,
        ENOTDIR,
        EISDIR,
        EINVAL,
        ENFILE,
        EMFILE,
        ENOTTY,
        ETXTBSY,
        EFBIG,
        ENOSPC,
        ESPIPE,
        EROFS,
        EMLINK,
        EPIPE,
        EDOM,
        ERANGE,
        EDEADLK,
        ENAMETOOLONG,
        ENOLCK,
        ENOSYS,
        ENOTEMPTY,
        ELOOP,
        ENOMSG,
        EIDRM,
        ENOSTR,
        ENODATA,
        ETIME,
        ENOSR,
        ENOLINK,
        EPROTO,
        EBADMSG,
        EOVERFLOW,
        EILSEQ,
        EUSERS,
        ENOTSOCK,
        EDESTADDRREQ,
        EMSGSIZE,
        EPROTOTYPE,
        ENOPROTOOPT,
        EPROTONOSUPPORT,
        ESOCKTNOSUPPORT,
        EOPNOTSUPP,
        EPFNOSUPPORT,
        EAFNOSUPPORT,
        EADDRINUSE,
        EADDRNOTAVAIL,
        ENETDOWN,
        ENETUNREACH,
        ENETRESET,
        ECONNABORTED,
        ECONNRESET,
        ENOBUFS,
        EISCONN,
        ENOTCONN,
        ESHUTDOWN,
        ETOOMANYREFS,
        ETIMEDOUT,
        ECONNREFUSED,
        EHOSTDOWN,
        EHOSTUNREACH,
        EALREADY,
        EINPROGRESS,
        ESTALE,
        EDQUOT,
        ECANCELED,
        ENOKEY,
        EKEYEXPIRED,
        EKEYREVOKED,
        EKEYREJECTED,
        EOWNERDEAD,
        ENOTRECOVERABLE,
        ERFKILL,
        EHWPOISON,
    ];
    assert_eq!(
        expected.len(),
        consts::ERRNOS.len(),
        "every errno of the table is checked"
    );
    for &(name, value) in expected {
        assert_eq!(consts::errno(name), Some(value as u16), "{name}");
    }
    for &(name, value) in consts::ERRNOS {
        assert_eq!(
            consts::errno_name(value),
            Some(name),
            "errno numbers are unique"
        );
        assert!((1..=sandbox_policy::action::MAX_ERRNO).contains(&value));
    }
}

/// Constants the `libc` crate lacks; [`constants_missing_from_libc_match_the_c_headers`] checks
/// them.
const LIBC_LACKS: [&str; 6] = [
    "FIOSETOWN",
    "SIOCSPGRP",
    "F_SETSIG",
    "F_GETSIG",
    "F_SETOWN_EX",
    "F_GETOWN_EX",
];

/// Constants the `libc` crate lacks, checked against the C headers: a program compiled with
/// the machine's gcc prints their values.
#[test]
fn constants_missing_from_libc_match_the_c_headers() {
    let names = LIBC_LACKS;
    let dir = std::env::temp_dir().join(format!("consts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("c.c");
    let mut text = String::from(
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/ioctl.h>\n\
         #include <linux/sockios.h>\nint main(void) {\n",
    );
    for n in names {
        text += &format!("    printf(\"%ld\\n\", (long){n});\n");
    }
    text += "    return 0;\n}\n";
    std::fs::write(&src, text).unwrap();
    let exe = dir.join("c");
    let built = std::process::Command::new("gcc")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc is installed");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = std::process::Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let values: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    for (n, v) in names.iter().zip(values) {
        assert_eq!(
            sandbox_policy::consts::constant(sandbox_policy::NATIVE, n),
            Some(v),
            "{n}"
        );
    }
}

/// The constant tables of docs/reference.md (section 5), written by hand, list exactly the
/// constants of `consts` with their values on both architectures.
#[test]
fn reference_doc_lists_every_constant_with_its_value() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc
        .find("## 5. Constants")
        .expect("section 5 of docs/reference.md");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    // Values are written in hex (`0x40`) or, for some flags, octal (`0o40000`), or decimal.
    let number = |cell: &str| {
        let v = cell.trim().trim_matches('`');
        let parsed = if let Some(h) = v.strip_prefix("0x") {
            u64::from_str_radix(h, 16)
        } else if let Some(o) = v.strip_prefix("0o") {
            u64::from_str_radix(o, 8)
        } else {
            v.parse()
        };
        parsed.unwrap_or_else(|e| panic!("docs/reference.md: `{v}`: {e}"))
    };
    let mut listed = std::collections::BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        let mut rows = Vec::new();
        match cells.len() {
            // name | value | | name | value: the same on both architectures.
            5 => {
                rows.push((cells[0], number(cells[1]), number(cells[1])));
                if !cells[3].trim().is_empty() {
                    rows.push((cells[3], number(cells[4]), number(cells[4])));
                }
            }
            // name | x86_64 | aarch64
            3 => rows.push((cells[0], number(cells[1]), number(cells[2]))),
            _ => panic!("unexpected row in docs/reference.md: {line}"),
        }
        for (name, x86, arm) in rows {
            let name = name.trim().trim_matches('`');
            assert!(
                listed.insert(name.to_string(), (x86, arm)).is_none(),
                "{name} listed twice"
            );
        }
    }
    let expected: std::collections::BTreeMap<String, (u64, u64)> = consts::constants(Arch::X86_64)
        .map(|(name, x86)| {
            let arm = consts::constant(Arch::Aarch64, name).expect("every constant on aarch64");
            (name.to_string(), (x86, arm))
        })
        .collect();
    let mut wrong = Vec::new();
    for (name, values) in &expected {
        if listed.get(name) != Some(values) {
            wrong.push(format!(
                "{name} should be {values:#x?}, is {:#x?}",
                listed.get(name)
            ));
        }
    }
    for name in listed.keys().filter(|n| !expected.contains_key(*n)) {
        wrong.push(format!("{name} is not a constant"));
    }
    assert!(
        wrong.is_empty(),
        "docs/reference.md section 5: {}",
        wrong.join("; ")
    );
}
